"""What a due cron timer leads to: its plan (slots.py), and the slots recorded as events.

Every slot the plan decides about is recorded in `slot_requests` (unique per webhook and
slot, each with its own delivery id) and gets its event: one `delivery.requested` per
delivered slot, one `delivery.skipped` per group of skipped slots. A slot another
replica (or an earlier try) recorded already gets nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

import asyncpg
import structlog

from cronhooks_common.clock import iso
from cronhooks_common.cron import CronError, cached_schedule
from cronhooks_common.events import (
    UNSET,
    DeliveryRequested,
    DeliverySkipped,
    Target,
    delivery_stream,
)
from cronhooks_scheduler import queries
from cronhooks_scheduler.slots import SlotPlan, plan_slots
from cronhooks_scheduler.webhook_copy import Schedule

log = structlog.get_logger(__name__)


SlotEvent = DeliveryRequested | DeliverySkipped


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """One row of slot_requests and its event, which takes the delivery id the row gets
    when it is recorded: `event(delivery_id=…)`."""

    webhook_id: int
    slot: datetime
    event: Callable[..., SlotEvent]


def plan_of(
    webhook_id: int, schedule: Schedule, due_at: datetime, now: datetime
) -> tuple[SlotPlan, timedelta] | None:
    """The plan of a due cron timer, and the webhook's jitter offset; None if its schedule
    is unusable.

    A cron timer is due at slot + offset (jitter.py), so the slot is `due_at - offset`.
    The plan is made in slot time, with `now - offset`: a slot counts as missed when its
    *send time* is more than the grace in the past — a slot is never late because of its
    own offset — and every later slot of a catch-up is judged the same way."""
    try:
        cron = cached_schedule(schedule.cron_schedule, schedule.timezone)
    except CronError:
        log.error("cron_schedule_invalid", webhook_id=webhook_id)
        return None
    offset = schedule.offset(webhook_id)
    plan = plan_slots(
        cron,
        policy=schedule.catch_up_policy,
        grace_seconds=schedule.misfire_grace_seconds,
        due_at=due_at - offset,
        now=now - offset,
    )
    return plan, offset


def slot_records(
    webhook_id: int, schedule: Schedule, target: Target, plan: SlotPlan, offset: timedelta
) -> list[SlotRecord]:
    next_run = None if plan.next_due is None else iso(plan.next_due)
    # With jitter the request says when it was due to leave, so the dispatcher's fire lag
    # measures the scheduler's precision, not the offset (absent without jitter).
    jitter = offset // timedelta(milliseconds=1) if offset else UNSET
    records = [
        SlotRecord(
            webhook_id,
            delivery.slot,
            partial(
                DeliveryRequested,
                webhook_id=webhook_id,
                kind="cron",
                attempt=1,
                trigger="schedule",
                scheduled_for=iso(delivery.slot),
                missed_count=delivery.missed_count,
                next_run_at=next_run,
                target=target,
                jitter_offset_ms=jitter,
            ),
        )
        for delivery in plan.deliveries
    ]
    if plan.skipped:
        last = plan.skipped[-1]
        skipped = partial(
            DeliverySkipped,
            webhook_id=webhook_id,
            kind="cron",
            attempt=0,
            trigger="schedule",
            scheduled_for=iso(last),
            status="skipped",
            reason="missed",
            skipped_count=plan.skipped_count,
            first_skipped=iso(plan.skipped[0]),
            policy=schedule.catch_up_policy,
            next_run_at=next_run,
        )
        records.append(SlotRecord(webhook_id, last, skipped))
    return records


async def record_slots(
    conn: asyncpg.Connection, records: list[SlotRecord]
) -> list[tuple[str, SlotEvent]]:
    """Record the slots; (stream, event) of each one recorded now, in the records' order."""
    if not records:
        return []
    ids = await conn.fetch(queries.NEW_DELIVERY_IDS, len(records))
    inserted = await conn.fetch(
        queries.RECORD_SLOTS,
        [r.webhook_id for r in records],
        [r.slot for r in records],
        [row["id"] for row in ids],
    )
    fresh = {(r["webhook_id"], r["slot"]): r["delivery_id"] for r in inserted}
    out: list[tuple[str, SlotEvent]] = []
    for record in records:
        delivery_id = fresh.get((record.webhook_id, record.slot))
        if delivery_id is None:
            log.warning(
                "slot_already_requested", webhook_id=record.webhook_id, slot=iso(record.slot)
            )
            continue
        out.append((delivery_stream(delivery_id), record.event(delivery_id=delivery_id)))
    return out
