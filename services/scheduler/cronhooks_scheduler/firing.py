"""Claim due timers and turn them into events, one transaction per batch.

`fire_due` locks up to `batch_size` due timers with FOR UPDATE SKIP LOCKED (replicas take
disjoint batches) and, in the same transaction:

* cron timers: records every slot it decides about in `slot_requests` (unique per
  webhook and slot, each with its own delivery id), appends one `delivery.requested` per
  delivered slot and one `delivery.skipped` per group of skipped slots (slots.py), and
  moves the timer to its next slot;
* retry timers: appends the next `delivery.requested` of that delivery (or, if the
  webhook was deleted or disabled meanwhile, a final `delivery.failed`), and deletes the
  timer.

A crash before commit leaves everything as it was; after commit each slot has been
requested exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.buckets import Router, delivery_of, fetch_routed, partition
from cronhooks_common.clock import iso
from cronhooks_common.cron import CronError, cached_schedule
from cronhooks_common.events import CHANGE, CRON, Causation, EventType, NewEvent, delivery_stream
from cronhooks_common.jitter import offset_of
from cronhooks_common.webhooks import target_of
from cronhooks_scheduler import budget
from cronhooks_scheduler.slots import SlotPlan, plan_slots
from cronhooks_scheduler.triggers import first_fire, retry_fire

log = structlog.get_logger(__name__)

REQUESTED = Counter("cronhooks_scheduler_deliveries_requested_total", "Slots requested")
SKIPPED = Counter("cronhooks_scheduler_slots_skipped_total", "Slots skipped", ["reason"])
RETRIES = Counter("cronhooks_scheduler_retries_total", "Retry timers fired", ["outcome"])

_CLAIM = """
select t.timer_key, t.kind, t.subject, t.due_at, t.payload, w.config, w.deleted, w.gone
from scheduler.timers t
left join scheduler.webhooks w on w.webhook_id = t.subject and t.kind in ('cron', 'retry')
where t.due_at <= $1
order by t.due_at
limit $2
for update of t skip locked
"""

Append = tuple[str, int, NewEvent, Causation]


@dataclass(frozen=True, slots=True)
class _SlotRecord:
    """One row of slot_requests and the event that goes with it."""

    webhook_id: int
    slot: datetime
    event_type: str
    data: dict[str, Any]


def _plan(row: asyncpg.Record, now: datetime) -> tuple[SlotPlan, timedelta] | None:
    """The plan of a due cron timer, and the webhook's jitter offset.

    A cron timer is due at slot + offset (jitter.py), so the slot is `due_at - offset`.
    The plan is made in slot time, with `now - offset`: a slot counts as missed when its
    *send time* is more than the grace in the past — a slot is never late because of its
    own offset — and every later slot of a catch-up is judged the same way."""
    config = row["config"]
    if config is None or row["deleted"]:
        log.error("timer_without_webhook", timer_key=row["timer_key"])
        return None
    try:
        schedule = cached_schedule(config["cron_schedule"], config["timezone"])
    except CronError:
        log.error("cron_schedule_invalid", webhook_id=row["subject"])
        return None
    offset = offset_of(row["subject"], config)
    plan = plan_slots(
        schedule,
        policy=config.get("catch_up_policy", "LATEST_ONCE"),
        grace_seconds=int(config.get("misfire_grace_seconds", 60)),
        due_at=row["due_at"] - offset,
        now=now - offset,
    )
    return plan, offset


def _slot_records(
    webhook_id: int, config: dict[str, Any], plan: SlotPlan, offset: timedelta
) -> list[_SlotRecord]:
    next_run = None if plan.next_due is None else iso(plan.next_due)
    # With jitter the request says when it was due to leave, so the dispatcher's fire lag
    # measures the scheduler's precision, not the offset (absent without jitter).
    jitter = {"jitter_offset_ms": offset // timedelta(milliseconds=1)} if offset else {}
    records = [
        _SlotRecord(
            webhook_id,
            delivery.slot,
            EventType.DELIVERY_REQUESTED,
            {
                "webhook_id": webhook_id,
                "kind": CRON,
                "attempt": 1,
                "trigger": "schedule",
                "scheduled_for": iso(delivery.slot),
                "missed_count": delivery.missed_count,
                "next_run_at": next_run,
                "target": target_of(config),
                **jitter,
            },
        )
        for delivery in plan.deliveries
    ]
    if plan.skipped:
        last = plan.skipped[-1]
        records.append(
            _SlotRecord(
                webhook_id,
                last,
                EventType.DELIVERY_SKIPPED,
                {
                    "webhook_id": webhook_id,
                    "kind": CRON,
                    "attempt": 0,
                    "trigger": "schedule",
                    "scheduled_for": iso(last),
                    "status": "skipped",
                    "reason": "missed",
                    "skipped_count": plan.skipped_count,
                    "first_skipped": iso(plan.skipped[0]),
                    "policy": config.get("catch_up_policy", "LATEST_ONCE"),
                    "next_run_at": next_run,
                },
            )
        )
    return records


def _retry_append(row: asyncpg.Record) -> Append:
    """The event a due retry timer leads to."""
    p = row["payload"]
    base = {
        "delivery_id": p["delivery_id"],
        "webhook_id": p["webhook_id"],
        "kind": p.get("kind", CRON),
        "attempt": p["attempt"],
        "trigger": "retry",
        "scheduled_for": p.get("scheduled_for"),
        "missed_count": p.get("missed_count", 0),
    }
    if row["config"] is None or row["deleted"] or row["gone"]:
        why = "deleted" if row["config"] is None or row["deleted"] else "disabled"
        event = NewEvent(
            EventType.DELIVERY_FAILED,
            {
                **base,
                "attempt": p["attempt"] - 1,
                "status": "failed",
                "error": f"retry cancelled: the webhook was {why}",
                "response_status": None,
                "duration_ms": None,
            },
        )
        RETRIES.labels("cancelled").inc()
    else:
        event = NewEvent(
            EventType.DELIVERY_REQUESTED,
            {
                **base,
                "previous_error": p.get("previous_error", ""),
                "target": target_of(row["config"]),
            },
        )
        RETRIES.labels("requested").inc()
    return (
        delivery_stream(p["delivery_id"]),
        p["after_version"],
        event,
        Causation.new("scheduler"),
    )


async def fire_due(
    pool: asyncpg.Pool, *, now: datetime, batch_size: int = 1000, router: Router | None = None
) -> int:
    """Fire every due timer (up to `batch_size`); return how many timers were claimed.
    `router` (the loop's) finds the partitions of the retried deliveries' streams."""
    router = router or Router()
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(_CLAIM, now, batch_size)
        if not rows:
            return 0
        slots: list[_SlotRecord] = []
        retries: list[Append] = []
        fires: list[Append] = []
        moves: list[tuple[str, datetime | None]] = []
        configs: dict[int, dict[str, Any]] = {}
        for row in rows:
            if row["kind"] == "retry":
                retries.append(_retry_append(row))
                moves.append((row["timer_key"], None))
                continue
            if row["kind"] == "trigger":
                stream, event = first_fire(row["payload"], now)
                fires.append((stream, 0, event, Causation.new("scheduler")))
                moves.append((row["timer_key"], None))
                continue
            if row["kind"] == "fire_retry":
                stream, version, event = retry_fire(row["payload"])
                retries.append((stream, version, event, Causation.new("scheduler")))
                moves.append((row["timer_key"], None))
                continue
            planned = _plan(row, now) if row["kind"] == "cron" else None
            if planned is None:
                moves.append((row["timer_key"], None))
                continue
            plan, offset = planned
            slots.extend(_slot_records(row["subject"], row["config"], plan, offset))
            configs[row["subject"]] = row["config"]
            next_due = None if plan.next_due is None else plan.next_due + offset
            moves.append((row["timer_key"], next_due))
        retries = await _with_changes(conn, retries, router)
        requested = await budget.apply(conn, await _record_slots(conn, slots), configs)
        appends = requested + await _current(conn, retries, router) + fires
        await _append_all(conn, appends, now)
        REQUESTED.inc(sum(1 for _, _, e, _ in appends if e.type == EventType.DELIVERY_REQUESTED))
        SKIPPED.labels("budget").inc(
            sum(1 for _, _, e, _ in requested if e.data.get("reason") == "budget")
        )
        await _move_timers(conn, moves)
        return len(rows)


# What a change delivery's retry resends from its first request, as it was sent then.
CARRIED = ("depth", "batch_id", "changes", "content_truncated")


async def _with_changes(
    conn: asyncpg.Connection, retries: list[Append], router: Router
) -> list[Append]:
    """A retry of a change delivery sends the same changes at the same depth: they come
    from the delivery's first request (one read for all such retries of the batch)."""
    streams = [
        s
        for s, _, e, _ in retries
        if e.type == EventType.DELIVERY_REQUESTED and e.data.get("kind") == CHANGE
    ]
    if not streams:
        return retries
    rows = await _by_partition(
        conn,
        router,
        streams,
        "select stream, data from {table} where stream = any($1::text[]) and version = 1",
    )
    first = {r["stream"]: r["data"] for r in rows}
    out: list[Append] = []
    for stream, version, event, causation in retries:
        original = first.get(stream)
        if original is not None and event.data.get("kind") == CHANGE:
            carried = {k: original[k] for k in CARRIED if k in original}
            event = NewEvent(event.type, {**event.data, **carried})
        out.append((stream, version, event, causation))
    return out


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


async def _record_slots(conn: asyncpg.Connection, records: list[_SlotRecord]) -> list[Append]:
    if not records:
        return []
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
    appends: list[Append] = []
    for record in records:
        delivery_id = fresh.get((record.webhook_id, record.slot))
        if delivery_id is None:
            log.warning(
                "slot_already_requested", webhook_id=record.webhook_id, slot=iso(record.slot)
            )
            continue
        event = NewEvent(record.event_type, {"delivery_id": delivery_id, **record.data})
        appends.append((delivery_stream(delivery_id), 0, event, Causation.new(actor="scheduler")))
        if record.event_type == EventType.DELIVERY_SKIPPED:
            SKIPPED.labels("missed").inc(record.data["skipped_count"])
    return appends


async def _current(
    conn: asyncpg.Connection, appends: list[Append], router: Router
) -> list[Append]:
    """Drop appends whose stream has moved past the expected version (already handled)."""
    if not appends:
        return []
    rows = await _by_partition(
        conn,
        router,
        [stream for stream, _, _, _ in appends],
        "select stream, max(version) from {table} where stream = any($1::text[]) group by stream",
    )
    versions = {r["stream"]: r["max"] for r in rows}
    keep = [a for a in appends if versions.get(a[0], 0) == a[1]]
    for stream, expected, _, _ in appends:
        if versions.get(stream, 0) != expected:
            log.warning("retry_stale", stream=stream, expected=expected)
    return keep


async def _by_partition(
    conn: asyncpg.Connection, router: Router, streams: list[str], sql: str
) -> list[asyncpg.Record]:
    """`sql` over the streams, in each one's partition of the event store (through the
    partitioned parent a generic plan would probe every bucket's partition)."""

    async def fetch(suffix: str, group: list[str]) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            sql.format(table=partition("eventstore.events", suffix)), group
        )
        return rows

    return await fetch_routed(conn, router, streams, delivery_of, fetch)


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
