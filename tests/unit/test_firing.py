from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronhooks_scheduler.firing import decide_slot

CONFIG = {"cron_schedule": "*/5 * * * *", "timezone": "UTC", "misfire_grace_seconds": 60}
T = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)


def test_on_time_slot_is_requested_and_the_timer_moves_to_the_next() -> None:
    d = decide_slot(CONFIG, T, T + timedelta(milliseconds=3))
    assert (d.slot, d.missed_count, d.next_due) == (T, 0, T + timedelta(minutes=5))


def test_late_within_grace_is_not_missed() -> None:
    d = decide_slot(CONFIG, T, T + timedelta(seconds=60))
    assert (d.slot, d.missed_count) == (T, 0)


def test_after_downtime_latest_slot_once_with_missed_count() -> None:
    d = decide_slot(CONFIG, T, T + timedelta(minutes=17))
    # Slots 9:00 9:05 9:10 9:15 were missed; 9:15 is requested standing for 3 earlier ones.
    assert d.slot == T + timedelta(minutes=15)
    assert d.missed_count == 3
    assert d.next_due == T + timedelta(minutes=20)
