"""Claim due timers and turn them into events, one transaction per batch.

`fire_due` locks up to `batch_size` due timers with FOR UPDATE SKIP LOCKED (replicas take
disjoint batches); each timer's kind (timer_kinds.py) says what it leads to and when it is
due next. Then, in the same transaction, it records the cron slots (slot_events.py: one
delivery id each, unique per webhook and slot), turns every slot while deliveries are
paused (paused.py; retries and agent-cron fires are then not claimed), the slots of a day
whose costs reached a limit (cost_budget.py) and those beyond a webhook's daily budget
(budget.py) into skips, appends every event — the slots', the retries' (those whose
stream has not moved on, retries.py) and the triggers' first fires — and moves or deletes
the timers.

A crash before commit leaves everything as it was; after commit each slot has been
requested exactly once.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore, pause
from cronhooks_common.buckets import Router
from cronhooks_common.events import Causation, DeliveryRequested, DeliverySkipped, NewEvent
from cronhooks_scheduler import budget, cost_budget, paused, queries
from cronhooks_scheduler.retries import Pending, current, with_changes
from cronhooks_scheduler.slot_events import record_slots
from cronhooks_scheduler.timer_kinds import KINDS, Batch, unknown

log = structlog.get_logger(__name__)

REQUESTED = Counter("cronhooks_scheduler_deliveries_requested_total", "Slots requested")
SKIPPED = Counter("cronhooks_scheduler_slots_skipped_total", "Slots skipped", ["reason"])

Append = tuple[str, int, NewEvent, Causation]


async def fire_due(
    pool: asyncpg.Pool, *, now: datetime, batch_size: int = 1000, router: Router | None = None
) -> int:
    """Fire every due timer (up to `batch_size`); return how many timers were claimed.
    `router` (the loop's) finds the partitions of the retried deliveries' streams."""
    router = router or Router()
    async with pool.acquire() as conn, conn.transaction():
        # First the pause switch, share-locked to the commit (cronhooks_common.pause): a
        # pauseDeliveries committing now waits for this batch, and a batch after it sees it.
        held = (await pause.deciding(conn)).active(now)
        rows = await conn.fetch(
            queries.CLAIM_WHILE_PAUSED if held else queries.CLAIM, now, batch_size
        )
        if not rows:
            return 0
        batch = Batch(now)
        moves = [(row["timer_key"], KINDS.get(row["kind"], unknown)(batch, row)) for row in rows]
        retries = await with_changes(conn, batch.retries, router)
        slots = await record_slots(conn, batch.slots)
        if held:
            slots = paused.apply(slots, batch.schedules)
        # Costs first: a slot skipped for them uses none of maxDeliveriesPerDay.
        slots = await cost_budget.apply(conn, slots, batch.schedules)
        slots = await budget.apply(conn, slots, batch.schedules)
        pending: list[Pending] = [
            *((stream, 0, event) for stream, event in slots),
            *await current(conn, retries, router),
            *batch.fires,
        ]
        await _append_all(conn, [_append(p) for p in pending], now)
        _count(pending, [event for _, event in slots])
        await _move_timers(conn, moves)
        return len(rows)


def _append(pending: Pending) -> Append:
    stream, version, event = pending
    return stream, version, NewEvent.of(event), Causation.new(actor="scheduler")


def _count(pending: list[Pending], slots: list[DeliveryRequested | DeliverySkipped]) -> None:
    REQUESTED.inc(sum(1 for _, _, event in pending if isinstance(event, DeliveryRequested)))
    skips = [event for event in slots if isinstance(event, DeliverySkipped)]
    for event in skips:
        if event.reason == "missed":
            SKIPPED.labels("missed").inc(event.skipped_count)
    for reason in ("budget", "cost_budget", "paused"):
        SKIPPED.labels(reason).inc(sum(1 for event in skips if event.reason == reason))


async def _append_all(conn: asyncpg.Connection, appends: list[Append], now: datetime) -> None:
    """Append everything; a stream that moved meanwhile is dropped (logged), not retried
    forever, so one odd timer can never block the batch it is in."""
    while appends:
        try:
            async with conn.transaction():  # savepoint: a failed try leaves nothing behind
                await eventstore.append_many(conn, appends, occurred_at=now)
            return
        except eventstore.ConcurrencyError as exc:
            log.error("timer_append_conflict", stream=exc.stream)
            appends = [a for a in appends if a[0] != exc.stream]


async def _move_timers(conn: asyncpg.Connection, moves: list[tuple[str, datetime | None]]) -> None:
    gone = [key for key, due in moves if due is None]
    moved = [(key, due) for key, due in moves if due is not None]
    if gone:
        await conn.execute(queries.DELETE_TIMERS, gone)
    if moved:
        await conn.execute(
            queries.MOVE_TIMERS, [key for key, _ in moved], [due for _, due in moved]
        )
