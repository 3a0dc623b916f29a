"""Claim due timers and turn them into events, one transaction per batch.

`fire_due` locks up to `batch_size` due timers with FOR UPDATE SKIP LOCKED (replicas take
disjoint batches), and in the same transaction records each slot in `slot_requests`
(unique per webhook and slot), appends one `delivery.requested` per slot and moves each
timer to its next slot. A crash before commit leaves everything as it was; after commit
the slot is requested exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.clock import iso
from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import Causation, EventType, NewEvent, delivery_stream
from cronhooks_common.webhooks import target_of

log = structlog.get_logger(__name__)

REQUESTED = Counter("cronhooks_scheduler_deliveries_requested_total", "Slots requested")

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
class SlotDecision:
    """What to do with one due cron timer (pure: computed from config, due time and now)."""

    slot: datetime
    missed_count: int
    next_due: datetime | None


def decide_slot(config: dict[str, Any], due_at: datetime, now: datetime) -> SlotDecision:
    """The slot to request for a timer due at `due_at`, and when the timer is due next.

    A slot seen more than `misfire_grace_seconds` late counts as missed; the default
    policy (LATEST_ONCE) requests only the most recent missed slot and says how many
    earlier ones it stands for.
    """
    schedule = CronSchedule.parse(config["cron_schedule"], config["timezone"])
    grace = timedelta(seconds=int(config.get("misfire_grace_seconds", 60)))
    if now - due_at <= grace:
        return SlotDecision(due_at, 0, schedule.next_after(due_at))
    slot, missed = due_at, 0
    while True:
        following = schedule.next_after(slot)
        if following > now:
            return SlotDecision(slot, missed, following)
        slot, missed = following, missed + 1


async def fire_due(pool: asyncpg.Pool, *, now: datetime, batch_size: int = 500) -> int:
    """Fire every due timer (up to `batch_size`); return how many timers were claimed."""
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(_CLAIM, now, batch_size)
        if not rows:
            return 0
        requests: list[tuple[int, dict[str, Any], SlotDecision]] = []
        moves: list[tuple[str, datetime | None]] = []
        for row in rows:
            config = row["config"]
            if row["kind"] != "cron" or config is None:
                log.error("timer_unknown", timer_key=row["timer_key"])
                moves.append((row["timer_key"], None))
                continue
            try:
                decision = decide_slot(config, row["due_at"], now)
            except CronError:
                log.error("cron_schedule_invalid", webhook_id=row["subject"])
                moves.append((row["timer_key"], None))
                continue
            requests.append((row["subject"], config, decision))
            moves.append((row["timer_key"], decision.next_due))
        await _request_slots(conn, requests, now)
        await _move_timers(conn, moves)
        return len(rows)


async def _request_slots(
    conn: asyncpg.Connection,
    requests: list[tuple[int, dict[str, Any], SlotDecision]],
    now: datetime,
) -> None:
    if not requests:
        return
    ids = await conn.fetch(
        "select nextval('eventstore.delivery_ids') as id from generate_series(1, $1)",
        len(requests),
    )
    inserted = await conn.fetch(
        """
        insert into scheduler.slot_requests (webhook_id, slot, delivery_id)
        select * from unnest($1::bigint[], $2::timestamptz[], $3::bigint[])
        on conflict (webhook_id, slot) do nothing
        returning webhook_id, slot, delivery_id
        """,
        [webhook_id for webhook_id, _, _ in requests],
        [d.slot for _, _, d in requests],
        [r["id"] for r in ids],
    )
    fresh = {(r["webhook_id"], r["slot"]): r["delivery_id"] for r in inserted}
    batch = []
    for webhook_id, config, decision in requests:
        delivery_id = fresh.get((webhook_id, decision.slot))
        if delivery_id is None:
            log.warning("slot_already_requested", webhook_id=webhook_id, slot=iso(decision.slot))
            continue
        data = {
            "delivery_id": delivery_id,
            "webhook_id": webhook_id,
            "attempt": 1,
            "trigger": "schedule",
            "scheduled_for": iso(decision.slot),
            "missed_count": decision.missed_count,
            "next_run_at": None if decision.next_due is None else iso(decision.next_due),
            "target": target_of(config),
        }
        causation = Causation.new(actor="scheduler")
        batch.append(
            (
                delivery_stream(delivery_id),
                0,
                NewEvent(EventType.DELIVERY_REQUESTED, data),
                causation,
            )
        )
    await eventstore.append_many(conn, batch, occurred_at=now)
    REQUESTED.inc(len(batch))


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
