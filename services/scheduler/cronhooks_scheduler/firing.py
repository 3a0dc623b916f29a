"""Claim due timers and turn them into events, one transaction per batch.

`fire_due` locks up to `batch_size` due timers with FOR UPDATE SKIP LOCKED (replicas take
disjoint batches). In the same transaction it records every slot it decides about in
`slot_requests` (unique per webhook and slot, each with its own delivery id), appends one
`delivery.requested` per delivered slot and one `delivery.skipped` per group of skipped
slots, and moves each timer to its next slot. A crash before commit leaves everything as
it was; after commit each slot has been requested exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.clock import iso
from cronhooks_common.cron import CronError, cached_schedule
from cronhooks_common.events import Causation, EventType, NewEvent, delivery_stream
from cronhooks_common.webhooks import target_of
from cronhooks_scheduler.slots import SlotPlan, plan_slots

log = structlog.get_logger(__name__)

REQUESTED = Counter("cronhooks_scheduler_deliveries_requested_total", "Slots requested")
SKIPPED = Counter("cronhooks_scheduler_slots_skipped_total", "Slots skipped", ["reason"])

_CLAIM = """
select t.timer_key, t.kind, t.subject, t.due_at, w.config
from scheduler.timers t
left join scheduler.webhooks w on w.webhook_id = t.subject and t.kind = 'cron'
where t.due_at <= $1
order by t.due_at
limit $2
for update of t skip locked
"""


@dataclass(frozen=True, slots=True)
class _Record:
    """One row of slot_requests and the event that goes with it."""

    webhook_id: int
    slot: datetime
    event_type: str
    data: dict[str, Any]


def _plan(row: asyncpg.Record, now: datetime) -> SlotPlan | None:
    config = row["config"]
    if row["kind"] != "cron" or config is None:
        log.error("timer_unknown", timer_key=row["timer_key"])
        return None
    try:
        schedule = cached_schedule(config["cron_schedule"], config["timezone"])
    except CronError:
        log.error("cron_schedule_invalid", webhook_id=row["subject"])
        return None
    return plan_slots(
        schedule,
        policy=config.get("catch_up_policy", "LATEST_ONCE"),
        grace_seconds=int(config.get("misfire_grace_seconds", 60)),
        due_at=row["due_at"],
        now=now,
    )


def _records(webhook_id: int, config: dict[str, Any], plan: SlotPlan) -> list[_Record]:
    records = []
    for delivery in plan.deliveries:
        records.append(
            _Record(
                webhook_id,
                delivery.slot,
                EventType.DELIVERY_REQUESTED,
                {
                    "webhook_id": webhook_id,
                    "attempt": 1,
                    "trigger": "schedule",
                    "scheduled_for": iso(delivery.slot),
                    "missed_count": delivery.missed_count,
                    "next_run_at": None if plan.next_due is None else iso(plan.next_due),
                    "target": target_of(config),
                },
            )
        )
    if plan.skipped:
        last = plan.skipped[-1]
        records.append(
            _Record(
                webhook_id,
                last,
                EventType.DELIVERY_SKIPPED,
                {
                    "webhook_id": webhook_id,
                    "attempt": 0,
                    "trigger": "schedule",
                    "scheduled_for": iso(last),
                    "status": "skipped",
                    "reason": "missed",
                    "skipped_count": plan.skipped_count,
                    "first_skipped": iso(plan.skipped[0]),
                    "policy": config.get("catch_up_policy", "LATEST_ONCE"),
                    "next_run_at": None if plan.next_due is None else iso(plan.next_due),
                },
            )
        )
    return records


async def fire_due(pool: asyncpg.Pool, *, now: datetime, batch_size: int = 1000) -> int:
    """Fire every due timer (up to `batch_size`); return how many timers were claimed."""
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(_CLAIM, now, batch_size)
        if not rows:
            return 0
        records: list[_Record] = []
        moves: list[tuple[str, datetime | None]] = []
        for row in rows:
            plan = _plan(row, now)
            if plan is None:
                moves.append((row["timer_key"], None))
                continue
            records.extend(_records(row["subject"], row["config"], plan))
            moves.append((row["timer_key"], plan.next_due))
        await _record_slots(conn, records, now)
        await _move_timers(conn, moves)
        return len(rows)


async def _record_slots(conn: asyncpg.Connection, records: list[_Record], now: datetime) -> None:
    if not records:
        return
    ids = await conn.fetch(
        "select nextval('eventstore.delivery_ids') as id from generate_series(1, $1)",
        len(records),
    )
    inserted = await conn.fetch(
        """
        insert into scheduler.slot_requests (webhook_id, slot, delivery_id)
        select * from unnest($1::bigint[], $2::timestamptz[], $3::bigint[])
        on conflict (webhook_id, slot) do nothing
        returning webhook_id, slot, delivery_id
        """,
        [r.webhook_id for r in records],
        [r.slot for r in records],
        [row["id"] for row in ids],
    )
    fresh = {(r["webhook_id"], r["slot"]): r["delivery_id"] for r in inserted}
    batch = []
    for record in records:
        delivery_id = fresh.get((record.webhook_id, record.slot))
        if delivery_id is None:
            log.warning(
                "slot_already_requested", webhook_id=record.webhook_id, slot=iso(record.slot)
            )
            continue
        event = NewEvent(record.event_type, {"delivery_id": delivery_id, **record.data})
        batch.append((delivery_stream(delivery_id), 0, event, Causation.new(actor="scheduler")))
        if record.event_type == EventType.DELIVERY_SKIPPED:
            SKIPPED.labels("missed").inc(record.data["skipped_count"])
    await eventstore.append_many(conn, batch, occurred_at=now)
    REQUESTED.inc(sum(1 for r in records if r.event_type == EventType.DELIVERY_REQUESTED))


async def _move_timers(conn: asyncpg.Connection, moves: list[tuple[str, datetime | None]]) -> None:
    gone = [key for key, due in moves if due is None]
    moved = [(key, due) for key, due in moves if due is not None]
    if gone:
        await conn.execute("delete from scheduler.timers where timer_key = any($1::text[])", gone)
    if moved:
        await conn.execute(
            """
            update scheduler.timers t set due_at = m.due_at
            from unnest($1::text[], $2::timestamptz[]) as m(timer_key, due_at)
            where t.timer_key = m.timer_key
            """,
            [key for key, _ in moved],
            [due for _, due in moved],
        )
