"""The watchdog's deadlines (CONTRACT §15), pure: each event of a delivery's stream sets
when it must have moved on by; a finished delivery is forgotten."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from cronhooks_common.events import Event
from cronhooks_scheduler.overdue import abandonment
from cronhooks_scheduler.watchdog import DEFAULT_TIMEOUT, GRACE, Watch, follow

T = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def row(
    kind: str,
    version: int,
    at: datetime,
    *,
    timeout: int | None = None,
    retry_at: str | None = None,
) -> dict[str, Any]:
    return {
        "type": kind,
        "version": version,
        "occurred_at": at,
        "timeout_seconds": timeout,
        "retry_at": retry_at,
    }


def test_a_request_must_end_within_its_timeout_plus_60_s() -> None:
    w = follow(None, row("delivery.requested", 1, T, timeout=30))
    assert w == Watch(1, 30 * S, T + 30 * S + GRACE)
    assert GRACE.total_seconds() == 60


def test_a_scheduled_retry_moves_the_deadline_to_after_it() -> None:
    w = follow(None, row("delivery.requested", 1, T, timeout=30))
    w = follow(w, row("delivery.attempt_failed", 2, T + 3 * S, retry_at="2026-12-06T13:00:00.000Z"))
    assert w is not None and w.deadline == T + timedelta(hours=1) + 30 * S + GRACE
    w = follow(w, row("delivery.requested", 3, T + timedelta(hours=1), timeout=5))  # new target
    assert w == Watch(3, 5 * S, T + timedelta(hours=1) + 5 * S + GRACE)


def test_a_queued_delivery_has_no_deadline_until_released() -> None:
    w = follow(None, row("delivery.requested", 1, T, timeout=30))
    w = follow(w, row("delivery.queued", 2, T))
    assert w is not None and w.deadline is None
    w = follow(w, row("delivery.released", 3, T + timedelta(days=2), timeout=10))
    assert w == Watch(3, 10 * S, T + timedelta(days=2) + 10 * S + GRACE)


def test_an_import_under_way_has_its_own_window() -> None:
    w = follow(None, row("delivery.requested", 1, T, timeout=30))
    w = follow(w, row("delivery.changes_received", 2, T + 29 * S))
    assert w is not None and w.deadline == T + 59 * S + GRACE
    w = follow(w, row("notes.imported", 3, T + 40 * S))
    assert w is not None and w.deadline == T + 70 * S + GRACE


def test_any_outcome_ends_the_watch() -> None:
    for final in ("delivery.succeeded", "delivery.failed", "delivery.skipped"):
        w = follow(None, row("delivery.requested", 1, T, timeout=30))
        assert follow(w, row(final, 2, T)) is None


def test_a_stream_first_read_mid_way_gets_the_default_timeout() -> None:
    w = follow(None, row("delivery.attempt_failed", 4, T, retry_at="2026-12-06T12:00:10.000Z"))
    assert w == Watch(4, DEFAULT_TIMEOUT, T + 10 * S + DEFAULT_TIMEOUT + GRACE)


def test_an_event_of_a_kind_it_does_not_know_keeps_the_deadline() -> None:
    w = follow(None, row("delivery.requested", 1, T, timeout=30))
    later = follow(w, row("run.heartbeat", 2, T + timedelta(hours=5)))
    assert later == Watch(2, 30 * S, T + 30 * S + GRACE)


def event(kind: str, version: int, data: dict[str, Any]) -> Event:
    return Event(uuid4(), kind, "delivery-7", version, T, data, uuid4())


def test_the_abandonment_names_the_delivery_and_its_last_attempt() -> None:
    first = {
        "delivery_id": 7,
        "webhook_id": 3,
        "kind": "cron",
        "attempt": 1,
        "trigger": "schedule",
        "scheduled_for": "2026-12-06T12:00:00.000Z",
        "missed_count": 0,
        "target": {},
    }
    history = [
        event("delivery.requested", 1, first),
        event("delivery.attempt_failed", 2, {**first, "retry_at": "x", "next_attempt": 2}),
        event("delivery.requested", 3, {**first, "attempt": 2, "trigger": "retry"}),
    ]
    assert abandonment(history).to_data() == {
        "delivery_id": 7,
        "webhook_id": 3,
        "kind": "cron",
        "attempt": 2,
        "scheduled_for": "2026-12-06T12:00:00.000Z",
        "trigger": "retry",
        "missed_count": 0,
        "status": "failed",
        "error": "abandoned",
        "response_status": None,
        "duration_ms": None,
    }
