"""The hot part of the read models, set-based: deliveries and their attempts (admin.deliveries,
delivery_attempts, attempt_logs) and what they tell of their webhook (its next run, its
last delivery).

A herd is tens of thousands of `delivery.*` events; each kind in a round becomes one
statement (queries.py) instead of one per event. apply.py hands these functions one
*round* at a time, each event with its typed data: at most one event per stream, so no
statement touches a delivery twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

import asyncpg
import msgspec.json

from cronhooks_admin.projections import queries as sql
from cronhooks_common.events import (
    UNSET,
    DeliveryAttemptFailed,
    DeliveryFailed,
    DeliveryOutcome,
    DeliveryQueued,
    DeliveryReleased,
    DeliveryRequested,
    DeliverySkipped,
    Event,
    UnsetType,
)
from cronhooks_common.traces import delivery_ref, trace_of

T = TypeVar("T")


def _ts(value: str | UnsetType | None) -> datetime | None:
    return None if value is None or value is UNSET else datetime.fromisoformat(value)


def _or_none(value: T | UnsetType) -> T | None:
    return None if value is UNSET else value


def _json(items: Sequence[msgspec.Struct] | UnsetType) -> str:
    """A list of the event's as JSON text, [] when the event has none."""
    return "[]" if isinstance(items, UnsetType) else msgspec.json.encode(items).decode()


async def requested(
    conn: asyncpg.Connection, items: Sequence[tuple[Event, DeliveryRequested]]
) -> None:
    if not items:
        return
    await conn.execute(
        sql.DELIVERIES_REQUESTED,
        [p.delivery_id for _, p in items],
        [p.webhook_id for _, p in items],
        # a later attempt seen first stands in as `retry` until the first one is projected
        [p.trigger if p.attempt == 1 else "retry" for _, p in items],
        [_ts(p.scheduled_for) for _, p in items],
        [p.attempt for _, p in items],
        [e.occurred_at for e, _ in items],
        [_or_none(p.replay_of) for _, p in items],
        [trace_of(p) for _, p in items],
        [_or_none(p.parent) for _, p in items],
    )
    slots = [(e, p) for e, p in items if p.trigger == "schedule" and p.attempt == 1]
    await _next_runs(conn, [(e, p.webhook_id, p.next_run_at) for e, p in slots])


async def _next_runs(
    conn: asyncpg.Connection, news: Sequence[tuple[Event, int, str | UnsetType | None]]
) -> None:
    """The scheduler says where a webhook's timer went: (event, webhook, next run)."""
    if not news:
        return
    await conn.execute(
        sql.NEXT_RUNS,
        [webhook_id for _, webhook_id, _ in news],
        [_ts(next_run_at) for _, _, next_run_at in news],
        [e.occurred_at for e, _, _ in news],
    )


async def finished(
    conn: asyncpg.Connection, items: Sequence[tuple[Event, DeliveryOutcome]]
) -> None:
    """Attempts ended: success, final failure, or failure with a retry to come."""
    if not items:
        return
    # No HTTP attempt behind the others (a retry cancelled by the scheduler): no log.
    logged = [(e, p) for e, p in items if p.request_body is not UNSET]
    if logged:
        await conn.execute(
            sql.ATTEMPTS_LOGGED,
            [p.delivery_id for _, p in logged],
            [p.attempt for _, p in logged],
            [p.request_body for _, p in logged],
            [p.response_status for _, p in logged],
            [_or_none(p.response_body) for _, p in logged],
            [_attempt_error(p) for _, p in logged],
            [p.duration_ms or 0 for _, p in logged],
            [_ts(p.started_at) or e.occurred_at for e, p in logged],
            [p.request_body_truncated is True for _, p in logged],
            # what the answer reported (§16.1): [] for most, which answer with neither
            [_json(p.costs) for _, p in logged],
            [_json(p.agent_logs) for _, p in logged],
        )
    # delivery.attempt_failed leaves the delivery pending: a retry comes at `retry_at`.
    final = [not isinstance(p, DeliveryAttemptFailed) for _, p in items]
    await conn.execute(
        sql.DELIVERIES_FINISHED,
        [p.delivery_id for _, p in items],
        [p.webhook_id for _, p in items],
        [p.status if f else "pending" for (_, p), f in zip(items, final, strict=True)],
        ["retry" if p.attempt > 1 else p.trigger for _, p in items],
        [_ts(p.scheduled_for) for _, p in items],
        [p.attempt for _, p in items],
        [p.response_status for _, p in items],
        [p.duration_ms for _, p in items],
        [p.error for _, p in items],
        [e.occurred_at for e, _ in items],
        [e.occurred_at if f else None for (e, _), f in zip(items, final, strict=True)],
        [_retry_at(p) for _, p in items],
        [delivery_ref(p.kind, p.delivery_id) for _, p in items],  # until its request says
    )
    await _last_deliveries(conn, [item for item, f in zip(items, final, strict=True) if f])


def _attempt_error(p: DeliveryOutcome) -> str | None:
    """The attempt's own error for its log: a delivery ended by its retry deadline
    (CONTRACT §17) says so as the delivery's error, its last attempt's still says what failed."""
    if isinstance(p, DeliveryFailed) and p.attempt_error is not UNSET:
        return p.attempt_error
    return p.error


def _retry_at(p: DeliveryOutcome) -> datetime | None:
    """When the retry of a failed attempt comes (None: the delivery ended)."""
    return _ts(p.retry_at) if isinstance(p, DeliveryAttemptFailed) else None


async def _last_deliveries(
    conn: asyncpg.Connection, items: Sequence[tuple[Event, DeliveryOutcome]]
) -> None:
    if not items:
        return
    await conn.execute(
        sql.LAST_DELIVERIES,
        [p.webhook_id for _, p in items],
        [e.occurred_at for e, _ in items],
        [p.status for _, p in items],
        [p.delivery_id for _, p in items],
    )


def skip_reason(p: DeliverySkipped) -> str:
    """The `error` a skipped delivery shows."""
    count = p.skipped_count
    if p.reason == "missed":
        first = p.scheduled_for if p.first_skipped is UNSET else p.first_skipped
        return (
            f"skipped {count} missed slot{'s' if count != 1 else ''} "
            f"from {first} (catchUpPolicy {_or_none(p.policy)})"
        )
    if p.reason == "concurrency":
        return "skipped: an earlier delivery was still pending (concurrencyPolicy FORBID)"
    if p.reason == "still_running":
        # concurrencyPolicy DELAY, a slot already waiting (CONTRACT §13): the reason itself
        return "still_running"
    if p.reason == "budget":
        # maxDeliveriesPerDay spent (CONTRACT §13: "shown as skipped with error `budget`")
        return "budget"
    if p.reason == "cost_budget":
        # maxCostPerDay reached (CONTRACT §16.4: "shown as skipped with error `cost_budget`")
        return "cost_budget"
    if p.reason == "paused":
        # deliveries were paused (CONTRACT §16.4): shown as cost_budget's, the reason itself
        return "paused"
    if p.reason == "chain_limit":
        # the trace reached CRONHOOKS_MAX_CHAIN_DELIVERIES (CONTRACT §11): the reason itself
        return "chain_limit"
    if p.reason in ("deleted", "disabled"):
        return f"skipped: the webhook was {p.reason} while the delivery waited its turn"
    return f"skipped: {p.reason}"


async def skipped(conn: asyncpg.Connection, items: Sequence[tuple[Event, DeliverySkipped]]) -> None:
    """Records of slots that were not delivered (catch-up policy, concurrency policy)."""
    if not items:
        return
    await conn.execute(
        sql.DELIVERIES_SKIPPED,
        [p.delivery_id for _, p in items],
        [p.webhook_id for _, p in items],
        [p.trigger for _, p in items],
        [_ts(p.scheduled_for) for _, p in items],
        [skip_reason(p) for _, p in items],
        [e.occurred_at for e, _ in items],
        # a chain_limit skip names its chain; any other, until its request says
        [
            p.trace if isinstance(p.trace, str) else delivery_ref(p.kind, p.delivery_id)
            for _, p in items
        ],
        [p.parent if isinstance(p.parent, str) else None for _, p in items],
    )
    news = [(e, p.webhook_id, p.next_run_at) for e, p in items if p.next_run_at is not UNSET]
    await _next_runs(conn, news)


# concurrencyPolicy DELAY and execution groups (CONTRACT §13): a delivery's wait.
# `delivery.queued` sets `queued_since`, `delivery.released` sets `queued_ms` (measured by
# the dispatcher that released it, so a rebuild gives the same).


async def queued(conn: asyncpg.Connection, items: Sequence[tuple[Event, DeliveryQueued]]) -> None:
    if not items:
        return
    await conn.execute(
        sql.DELIVERIES_QUEUED,
        [p.delivery_id for _, p in items],
        [e.occurred_at for e, _ in items],
    )


async def released(
    conn: asyncpg.Connection, items: Sequence[tuple[Event, DeliveryReleased]]
) -> None:
    if not items:
        return
    await conn.execute(
        sql.DELIVERIES_RELEASED,
        [p.delivery_id for _, p in items],
        [p.queued_ms for _, p in items],
    )
