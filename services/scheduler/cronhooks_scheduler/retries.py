"""Retry timers: a failed attempt with attempts left becomes a durable timer.

`delivery.attempt_failed` (from the dispatcher) carries `retry_at`; `on_attempt_failed`
turns it into a `retry:{delivery_id}` row of the same timer table the cron slots live in,
so a retry survives a restart of every process. When it is due (timer_kinds.py),
`next_request` makes the next `delivery.requested` (same delivery id, attempt + 1,
trigger `retry`, `previous_error`) with the webhook's current target — or, if the
webhook was deleted or disabled meanwhile, `cancelled` its final `delivery.failed`; if a
pause held the retry past its deadline (`held_too_long`), that end says `retry deadline
passed`. A change delivery's retry resends the changes of its first request
(`with_changes`); a retry whose stream moved on since is dropped (`current`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import asyncpg
import msgspec
import structlog

from cronhooks_common import retry_deadline
from cronhooks_common.buckets import Router, delivery_of, fetch_routed, partition
from cronhooks_common.events import (
    CHANGE,
    UNSET,
    ChangeSent,
    DeliveryAttemptFailed,
    DeliveryFailed,
    DeliveryRequested,
    Event,
    Kind,
    Payload,
    Target,
    UnsetType,
)
from cronhooks_scheduler import queries
from cronhooks_scheduler.timers import TIMERS_CHANNEL

log = structlog.get_logger(__name__)

# (stream, expected version, event data): an event to append, once all are decided.
Pending = tuple[str, int, Payload]


def retry_key(delivery_id: int) -> str:
    return f"retry:{delivery_id}"


class RetryTimer(msgspec.Struct, frozen=True, kw_only=True):
    """A retry timer's payload: the delivery's next attempt, which follows `after_version`
    of its stream. (The defaults: what the delivery's events imply when they lack a key.)"""

    delivery_id: int
    webhook_id: int
    kind: Kind = "cron"
    attempt: int
    scheduled_for: str | None = None
    missed_count: int = 0
    previous_error: str = ""
    after_version: int
    # when the delivery was first requested (CONTRACT §17: its retry deadline counts from
    # it); absent from timers of attempts that did not say (written before it)
    requested_at: str | UnsetType = UNSET


def retry_timer(event: Event, failed: DeliveryAttemptFailed) -> RetryTimer:
    """The retry timer of a failed attempt."""
    return RetryTimer(
        delivery_id=failed.delivery_id,
        webhook_id=failed.webhook_id,
        kind=failed.kind,
        attempt=failed.next_attempt,
        scheduled_for=failed.scheduled_for,
        missed_count=failed.missed_count,
        previous_error=failed.error or "",
        after_version=event.version,  # the next request follows this event on the stream
        requested_at=failed.requested_at,
    )


async def on_attempt_failed(
    conn: asyncpg.Connection, event: Event, payload: DeliveryAttemptFailed
) -> None:
    await conn.execute(
        queries.ADD_RETRY,
        retry_key(payload.delivery_id),
        payload.webhook_id,
        datetime.fromisoformat(payload.retry_at),
        msgspec.to_builtins(retry_timer(event, payload)),
    )
    await conn.execute(queries.NOTIFY, TIMERS_CHANNEL)


def next_request(timer: RetryTimer, target: Target) -> DeliveryRequested:
    """The request a due retry timer makes, with the webhook's current target."""
    return DeliveryRequested(
        delivery_id=timer.delivery_id,
        webhook_id=timer.webhook_id,
        kind=timer.kind,
        attempt=timer.attempt,
        trigger="retry",
        scheduled_for=timer.scheduled_for,
        missed_count=timer.missed_count,
        previous_error=timer.previous_error,
        target=target,
        requested_at=timer.requested_at,
    )


def held_too_long(timer: RetryTimer, target: Target, due_at: datetime, now: datetime) -> bool:
    """A retry that fires now, long after it was due (held by a pause, or with every
    scheduler down), would start past its webhook's retryDeadlineSeconds (CONTRACT §17)."""
    return retry_deadline.passed_as_carried(
        target.retry_deadline_seconds, timer.requested_at, retry_deadline.start_of(due_at, now)
    )


def cancelled(timer: RetryTimer, why: str) -> DeliveryFailed:
    """The end of a delivery whose webhook was deleted or disabled before its retry."""
    return ended(timer, f"retry cancelled: the webhook was {why}")


def ended(timer: RetryTimer, error: str) -> DeliveryFailed:
    """The end of a delivery whose retry is not made, saying why; its last attempt stands
    (the one before the retry)."""
    return DeliveryFailed(
        delivery_id=timer.delivery_id,
        webhook_id=timer.webhook_id,
        kind=timer.kind,
        attempt=timer.attempt - 1,
        trigger="retry",
        scheduled_for=timer.scheduled_for,
        missed_count=timer.missed_count,
        status="failed",
        error=error,
        response_status=None,
        duration_ms=None,
    )


class Carried(msgspec.Struct, frozen=True, kw_only=True):
    """What a change delivery's retry resends from its first request, as it was sent then
    (each absent from a request that lacked it)."""

    depth: int | UnsetType = UNSET
    batch_id: str | UnsetType = UNSET
    changes: list[ChangeSent] | UnsetType = UNSET
    content_truncated: Literal[True] | UnsetType = UNSET
    trace: str | UnsetType = UNSET  # a retry is the same delivery: same chain (§16.3)
    parent: str | UnsetType = UNSET


async def with_changes(
    conn: asyncpg.Connection, retries: list[Pending], router: Router
) -> list[Pending]:
    """A retry of a change delivery sends the same changes at the same depth: they come
    from the delivery's first request (one read for all such retries of the batch)."""
    streams = [
        stream
        for stream, _, event in retries
        if isinstance(event, DeliveryRequested) and event.kind == CHANGE
    ]
    if not streams:
        return retries
    rows = await by_partition(conn, router, streams, queries.FIRST_EVENTS)
    first = {r["stream"]: msgspec.convert(r["data"], Carried) for r in rows}
    out: list[Pending] = []
    for stream, version, event in retries:
        sent = first.get(stream)
        if sent is not None and isinstance(event, DeliveryRequested):
            event = msgspec.structs.replace(
                event,
                depth=sent.depth,
                batch_id=sent.batch_id,
                changes=sent.changes,
                content_truncated=sent.content_truncated,
                trace=sent.trace,
                parent=sent.parent,
            )
        out.append((stream, version, event))
    return out


async def current(
    conn: asyncpg.Connection, pending: list[Pending], router: Router
) -> list[Pending]:
    """Drop appends whose stream has moved past the expected version (already handled)."""
    if not pending:
        return []
    streams = [stream for stream, _, _ in pending]
    rows = await by_partition(conn, router, streams, queries.STREAM_VERSIONS)
    versions = {r["stream"]: r["max"] for r in rows}
    keep = [p for p in pending if versions.get(p[0], 0) == p[1]]
    for stream, expected, _ in pending:
        if versions.get(stream, 0) != expected:
            log.warning("retry_stale", stream=stream, expected=expected)
    return keep


async def by_partition(
    conn: asyncpg.Connection, router: Router, streams: list[str], statement: str
) -> list[asyncpg.Record]:
    """`statement` over the streams, in each one's partition of the event store (through
    the partitioned parent a generic plan would probe every bucket's partition)."""

    async def fetch(suffix: str, group: list[str]) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            statement.format(table=partition("eventstore.events", suffix)), group
        )
        return rows

    return await fetch_routed(conn, router, streams, delivery_of, fetch)
