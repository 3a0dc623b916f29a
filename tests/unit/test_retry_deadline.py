"""retryDeadlineSeconds (CONTRACT §17), the pure parts: the rule (exactly at the deadline is
in time, a second later is not, 0 is none), the admin's bounds named by the field, a
setting of both kinds carried by targets, and how a failed attempt is worded — ended at
once with `retry deadline passed` (a Retry-After's wait judged alike), or retried with the
request time carried on to the retry timer and the next request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from cronhooks_admin.commands.validation import normalize
from cronhooks_admin.errors import InputError
from cronhooks_common import retry_deadline
from cronhooks_common.clock import iso
from cronhooks_common.events import (
    CHANGE,
    CRON,
    UNSET,
    DeliveryAttemptFailed,
    DeliveryFailed,
    DeliveryRequested,
    Target,
    decode,
)
from cronhooks_common.retry_deadline import DEADLINE_PASSED
from cronhooks_common.webhooks import config_fields, target_of
from cronhooks_dispatcher import deadline
from cronhooks_dispatcher.attempt import Attempt
from cronhooks_dispatcher.outcome import Outcome
from cronhooks_dispatcher.record import finished
from cronhooks_dispatcher.retry import next_attempt_at
from cronhooks_scheduler.retries import (
    RetryTimer,
    ended,
    held_too_long,
    next_request,
    retry_timer,
)

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
CAUSE: Any = type("Cause", (), {"event_id": None, "stream": "delivery-7", "version": 1})


# --- the rule ------------------------------------------------------------------------------


def test_a_retry_exactly_at_the_deadline_is_in_time_a_second_later_is_not() -> None:
    assert not retry_deadline.passed(60, T0, T0 + timedelta(seconds=60))
    assert retry_deadline.passed(60, T0, T0 + timedelta(seconds=61))
    assert not retry_deadline.passed(60, T0, T0 + timedelta(seconds=59))
    assert retry_deadline.passed(604800, T0, T0 + timedelta(days=7, seconds=1))
    assert not retry_deadline.passed(604800, T0, T0 + timedelta(days=7))


def test_zero_or_no_request_time_is_no_deadline() -> None:
    assert not retry_deadline.passed(0, T0, T0 + timedelta(days=3650))
    assert not retry_deadline.passed_as_carried(60, UNSET, T0 + timedelta(days=3650))
    assert not retry_deadline.passed_as_carried(UNSET, iso(T0), T0 + timedelta(days=3650))
    assert retry_deadline.passed_as_carried(60, iso(T0), T0 + timedelta(seconds=61))


def target_with(deadline_seconds: int | None) -> Target:
    fields = {} if deadline_seconds is None else {"retry_deadline_seconds": deadline_seconds}
    return msgspec.convert(config(**fields), Target)


def timer_requested_at(requested_at: datetime | None) -> RetryTimer:
    return RetryTimer(
        delivery_id=7,
        webhook_id=3,
        attempt=2,
        after_version=2,
        **({} if requested_at is None else {"requested_at": iso(requested_at)}),
    )


@pytest.mark.parametrize(
    ("due", "fired", "ends"),
    [
        # fired on time or late by a busy claim (up to a minute): judged at its due time,
        # which was in time when it was set, however late the claim
        (50, 50, False),
        (60, 60.5, False),
        (60, 120, False),
        # fired more than a minute late (a pause held it): it starts now, past the deadline
        (10, 600, True),
        (59, 120.5, True),
        (5, 58, False),
    ],
)
def test_a_retry_timer_held_past_its_deadline_ends_its_delivery(
    due: float, fired: float, ends: bool
) -> None:
    at = [T0 + timedelta(seconds=s) for s in (due, fired)]
    assert held_too_long(timer_requested_at(T0), target_with(60), *at) is ends
    # held, but let go within a longer deadline; no deadline; a timer set before
    # deadlines existed (no request time): it is made
    assert not held_too_long(timer_requested_at(T0), target_with(3600), *at)
    assert not held_too_long(timer_requested_at(T0), target_with(0), *at)
    assert not held_too_long(timer_requested_at(T0), target_with(None), *at)
    assert not held_too_long(timer_requested_at(None), target_with(60), *at)


def test_a_retry_ended_so_says_why_and_keeps_its_last_attempt() -> None:
    event = ended(timer_requested_at(T0), DEADLINE_PASSED)
    assert (event.status, event.error, event.attempt) == ("failed", "retry deadline passed", 1)


# --- the admin's bounds ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", [CRON, CHANGE])
@pytest.mark.parametrize("value", [0, 60, 3600, 604800])
def test_deadlines_that_pass(kind: str, value: int) -> None:
    assert normalize({"retry_deadline_seconds": value}, kind=kind) == {
        "retry_deadline_seconds": value
    }


@pytest.mark.parametrize("kind", [CRON, CHANGE])
@pytest.mark.parametrize("value", [-1, 1, 59, 604801, 10**12])
def test_bad_deadlines_are_named(kind: str, value: int) -> None:
    with pytest.raises(InputError) as err:
        normalize({"retry_deadline_seconds": value}, kind=kind)
    assert err.value.field == "retryDeadlineSeconds"
    assert err.value.reason == "must be 0 (no deadline) or from 60 to 604800"


def test_both_kinds_keep_it_and_their_targets_carry_it() -> None:
    assert "retry_deadline_seconds" in config_fields(CRON)
    assert "retry_deadline_seconds" in config_fields(CHANGE)
    assert target_of(config(retry_deadline_seconds=600)).retry_deadline_seconds == 600
    # a configuration written before it: no deadline
    assert target_of(config()).retry_deadline_seconds is UNSET


# --- a failed attempt, worded ----------------------------------------------------------------


def config(**more: Any) -> dict[str, Any]:
    return {
        "url": "https://agent.example/hook",
        "instruction": "",
        "timeout_seconds": 30,
        "pass_api_key": False,
        "read_patterns": [],
        "write_patterns": [],
        "max_depth": 1,
        "max_retries": 5,
        **more,
    }


def request(seconds: int, attempt: int = 1, **more: Any) -> DeliveryRequested:
    target = msgspec.convert(config(retry_deadline_seconds=seconds), Target)
    return DeliveryRequested(
        delivery_id=7,
        webhook_id=3,
        attempt=attempt,
        scheduled_for=None,
        trigger="manual" if attempt == 1 else "retry",
        target=target,
        **more,
    )


def failed_at(req: DeliveryRequested, now: datetime, retry_after: str | None = None) -> Any:
    """The event a failed attempt of `req` (an HTTP 500) at `now` is recorded as."""
    attempt = Attempt(deadline.stamped(req, T0), now, "{}", 500, "down", 5)
    retry_at = next_attempt_at(req.attempt, retry_after, now)
    record = finished(CAUSE, attempt, Outcome(False, "HTTP 500: down"), retry_at)
    return decode(record.event.type, record.event.data)


def test_a_retry_past_the_deadline_ends_the_delivery_at_once() -> None:
    # attempt 3 failed at T0 + 30 s: its retry (90 s later) would start at T0 + 120 s
    event = failed_at(request(119, attempt=3, requested_at=iso(T0)), T0 + timedelta(seconds=30))
    assert isinstance(event, DeliveryFailed)
    assert event.error == deadline.DEADLINE_PASSED == "retry deadline passed"
    assert event.attempt_error == "HTTP 500: down"  # the attempt's log keeps what failed
    assert event.attempt == 3  # two of maxRetries 5 were never used
    retried = failed_at(request(120, attempt=3, requested_at=iso(T0)), T0 + timedelta(seconds=30))
    assert isinstance(retried, DeliveryAttemptFailed)
    assert retried.retry_at == iso(T0 + timedelta(seconds=120))


def test_a_retry_after_is_judged_by_the_same_rule() -> None:
    # the backoff (10 s) would be in time; the agent's Retry-After (1 h) is not
    assert isinstance(failed_at(request(600), T0), DeliveryAttemptFailed)
    ended = failed_at(request(600), T0, retry_after="3600")
    assert isinstance(ended, DeliveryFailed) and ended.error == "retry deadline passed"
    assert isinstance(failed_at(request(3600), T0, retry_after="3600"), DeliveryAttemptFailed)


def test_without_a_deadline_it_retries_until_max_retries() -> None:
    late = T0 + timedelta(days=30)
    for number in range(1, 6):
        event = failed_at(request(0, attempt=number, requested_at=iso(T0)), late)
        assert isinstance(event, DeliveryAttemptFailed)
    last = failed_at(request(0, attempt=6, requested_at=iso(T0)), late)
    assert isinstance(last, DeliveryFailed) and last.error == "HTTP 500: down"
    assert last.attempt_error is UNSET


def test_the_request_time_goes_with_the_retry_and_the_next_request() -> None:
    first = request(600)
    assert deadline.stamped(first, T0).requested_at == iso(T0)
    # a release or a retry keeps the first request's time; an old retry without it has none
    carried = request(600, attempt=2, requested_at=iso(T0))
    assert deadline.stamped(carried, T0 + timedelta(minutes=5)).requested_at == iso(T0)
    assert deadline.stamped(request(600, attempt=2), T0).requested_at is UNSET
    failed = failed_at(first, T0 + timedelta(seconds=1))
    assert isinstance(failed, DeliveryAttemptFailed) and failed.requested_at == iso(T0)
    cause: Any = type("Event", (), {"version": 2})
    timer = retry_timer(cause, failed)
    assert timer.requested_at == iso(T0)
    again = next_request(timer, first.target)
    assert again.requested_at == iso(T0) and again.attempt == 2
    # a timer made before it knows none: its payload and the request carry none
    old = msgspec.convert(
        {k: v for k, v in msgspec.to_builtins(timer).items() if k != "requested_at"}, RetryTimer
    )
    assert "requested_at" not in msgspec.to_builtins(old)
    assert next_request(old, first.target).requested_at is UNSET
