"""Catch-up policies after an outage (CONTRACT §2): the clock moved past missed slots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronhooks_common.cron import CronSchedule
from cronhooks_scheduler.slots import MAX_CATCH_UP, Delivery, plan_slots

FIVE = CronSchedule.parse("*/5 * * * *", "UTC")
T = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def plan(policy: str, now: datetime, grace: int = 60, schedule: CronSchedule = FIVE):  # type: ignore[no-untyped-def]
    return plan_slots(schedule, policy=policy, grace_seconds=grace, due_at=T, now=now)


def test_on_time_slot_is_delivered_and_the_timer_moves_on() -> None:
    p = plan("LATEST_ONCE", T + timedelta(milliseconds=3))
    assert p.deliveries == [Delivery(T, 0)] and p.skipped == []
    assert p.next_due == T + 5 * M


def test_late_within_grace_is_not_missed() -> None:
    for policy in ("LATEST_ONCE", "SKIP", "ALL"):
        p = plan(policy, T + timedelta(seconds=60))
        assert p.deliveries == [Delivery(T, 0)] and p.skipped == []


def test_latest_once_sends_one_delivery_standing_for_the_others() -> None:
    p = plan("LATEST_ONCE", T + 17 * M)  # 9:00 9:05 9:10 9:15 missed
    assert p.deliveries == [Delivery(T + 15 * M, 3)]
    assert p.skipped == [] and p.next_due == T + 20 * M


def test_latest_once_after_hours_down_is_still_one_delivery() -> None:
    p = plan("LATEST_ONCE", T + timedelta(hours=10, seconds=30))
    assert len(p.deliveries) == 1
    assert p.deliveries[0] == Delivery(T + timedelta(hours=10), 120)


def test_skip_sends_nothing_for_missed_slots_and_records_them() -> None:
    p = plan("SKIP", T + 17 * M)
    assert p.deliveries == []
    assert p.skipped == [T, T + 5 * M, T + 10 * M, T + 15 * M]
    assert p.skipped_count == 4 and p.next_due == T + 20 * M


def test_skip_still_delivers_a_slot_within_grace() -> None:
    p = plan("SKIP", T + 15 * M + timedelta(seconds=10))
    assert p.deliveries == [Delivery(T + 15 * M)]
    assert p.skipped_count == 3


def test_all_sends_each_missed_slot_oldest_first() -> None:
    p = plan("ALL", T + 17 * M)
    assert p.deliveries == [Delivery(T + i * 5 * M) for i in range(4)]
    assert p.skipped == []


def test_all_sends_at_most_100_and_skips_the_rest() -> None:
    minutely = CronSchedule.parse("* * * * *", "UTC")
    p = plan("ALL", T + timedelta(minutes=150, seconds=30), schedule=minutely)
    # 150 missed slots (9:00 … 11:29): the oldest 100 are sent, 50 recorded as skipped;
    # 11:30 is only 30 s late, within grace, and is delivered as usual.
    assert [d.slot for d in p.deliveries] == [T + i * M for i in range(MAX_CATCH_UP)] + [
        T + 150 * M
    ]
    assert p.skipped_count == 50 and p.skipped[0] == T + 100 * M and p.skipped[-1] == T + 149 * M
    assert p.next_due == T + 151 * M


def test_a_very_long_outage_is_planned_in_bounded_work() -> None:
    minutely = CronSchedule.parse("* * * * *", "UTC")
    now = T + timedelta(days=60, seconds=30)
    p = plan("LATEST_ONCE", now, schedule=minutely)
    assert p.deliveries[0].slot == T + timedelta(days=60)
    assert p.deliveries[0].missed_count >= 20_000  # a lower bound past the walk limit
    assert p.next_due == T + timedelta(days=60, minutes=1)
