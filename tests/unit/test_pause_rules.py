"""The pause switch's pure rules (CONTRACT §16.4): when a stored pause is in force, the
skip that stands for a paused slot, and what pauseDeliveries' input may be."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronhooks_admin.commands.pause import MAX_REASON, check_reason, check_until, shown
from cronhooks_admin.errors import InputError
from cronhooks_common.events import UNSET, DeliveryRequested, DeliverySkipped, Target
from cronhooks_common.pause import Pause
from cronhooks_scheduler.paused import paused_slot

T0 = datetime(2026, 2, 9, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_a_pause_is_in_force_from_since_until_its_until() -> None:
    assert not Pause().active(T0) and not Pause().expired(T0)
    forever = Pause(since=T0, reason="r")
    assert forever.active(T0 + 1000 * HOUR) and not forever.expired(T0 + 1000 * HOUR)
    bounded = Pause(since=T0, until=T0 + HOUR, reason="r")
    assert bounded.active(T0 + HOUR - timedelta(microseconds=1))
    assert not bounded.active(T0 + HOUR) and bounded.expired(T0 + HOUR)


def test_when_the_last_pause_ended() -> None:
    assert Pause().ended_at(T0) is None
    assert Pause(resumed_at=T0).ended_at(T0 + HOUR) == T0
    bounded = Pause(since=T0, until=T0 + HOUR, resumed_at=T0 - HOUR)
    assert bounded.ended_at(T0) is None  # paused now
    assert bounded.ended_at(T0 + 2 * HOUR) == T0 + HOUR  # ended at until, not yet resumed


def test_a_paused_slot_is_skipped_with_its_missed_slots_and_no_day() -> None:
    request = DeliveryRequested(
        delivery_id=7,
        webhook_id=3,
        kind="cron",
        attempt=1,
        trigger="schedule",
        scheduled_for="2026-02-09T10:00:00.000Z",
        missed_count=2,
        next_run_at="2026-02-09T10:05:00.000Z",
        target=Target(
            url="http://agent/",
            instruction="",
            timeout_seconds=60,
            pass_api_key=False,
            read_patterns=["*"],
            write_patterns=[],
            max_depth=1,
            max_retries=0,
        ),
    )
    skip = paused_slot(request, "Europe/Berlin")
    assert isinstance(skip, DeliverySkipped)
    assert (skip.reason, skip.skipped_count, skip.attempt) == ("paused", 3, 0)
    assert skip.scheduled_for == skip.first_skipped == "2026-02-09T10:00:00.000Z"
    assert skip.next_run_at == "2026-02-09T10:05:00.000Z" and skip.day is UNSET


@pytest.mark.parametrize(
    ("reason", "field"),
    [("", "reason"), ("  \n", "reason"), (None, "reason"), ("x" * (MAX_REASON + 1), "reason")],
)
def test_a_reason_must_be_1_to_1000_characters(reason: object, field: str) -> None:
    with pytest.raises(InputError) as refused:
        check_reason(reason)
    assert refused.value.field == field
    assert check_reason(" outage ") == "outage" and check_reason("x" * MAX_REASON)


def test_until_must_be_in_the_future() -> None:
    for until in (T0, T0 - HOUR):
        with pytest.raises(InputError) as refused:
            check_until(until, T0)
        assert refused.value.field == "until"
    assert check_until(None, T0) is None
    berlin = datetime.fromisoformat("2026-02-09T12:00:00+01:00")
    assert check_until(berlin, T0) == datetime(2026, 2, 9, 11, 0, tzinfo=UTC)


def test_what_delivery_pause_shows() -> None:
    off = {"paused": False, "since": None, "until": None, "reason": None}
    assert shown(Pause(), T0) == off
    assert shown(Pause(since=T0, until=T0 + HOUR, reason="r"), T0 + HOUR) == off  # ended
    assert shown(Pause(since=T0, reason="r", by="admin:1:a"), T0) == {
        "paused": True,
        "since": T0,
        "until": None,
        "reason": "r",
    }


def test_a_pause_change_wakes_the_schedulers_loop() -> None:
    from cronhooks_common.pause import WAKE_CHANNEL
    from cronhooks_scheduler.timers import TIMERS_CHANNEL

    assert WAKE_CHANNEL == TIMERS_CHANNEL  # libs/ names no service: the same name, twice
