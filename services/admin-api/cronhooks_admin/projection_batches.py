"""The hot part of the read models, set-based: deliveries, their attempts, notes.

A herd is tens of thousands of `delivery.*` events; each kind in a batch becomes one
statement (unnest) instead of one per event. projection.py hands these functions one
*round* at a time: at most one event per stream, so no statement touches a delivery or a
note twice. Values that many events of a round can set on one webhook (its next run, its
last delivery) are reduced to the latest per webhook in the statement (DISTINCT ON), which
is what applying them one by one gives, because every such update only moves forward.

Every statement is idempotent (an event applied again changes nothing) and tolerates
events of different streams in any order: the live projector, an admin command projecting
its own events inline, and a rebuild all end with the same tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_common.events import Event, EventType


def _ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


async def deliveries_requested(conn: asyncpg.Connection, events: list[Event]) -> None:
    if not events:
        return
    d = [e.data for e in events]
    await conn.execute(
        """
        insert into admin.deliveries
            (id, cron_webhook_id, status, trigger, scheduled_for, attempt, created_at,
             replay_of)
        select id, wh, 'pending', trg, sf, att, at, rep
        from unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::int[],
                    $6::timestamptz[], $7::bigint[]) as x(id, wh, trg, sf, att, at, rep)
        on conflict (id) do update set
            attempt = greatest(admin.deliveries.attempt, excluded.attempt),
            -- the retry it waited for is under way
            next_attempt_at = case when excluded.attempt > admin.deliveries.attempt
                                   then null else admin.deliveries.next_attempt_at end,
            -- what started the delivery (its first attempt's trigger): a retry is one
            -- more attempt of it, not a new trigger (a manual delivery stays manual)
            trigger = case when excluded.attempt = 1
                           then excluded.trigger else admin.deliveries.trigger end,
            scheduled_for = excluded.scheduled_for,
            created_at = least(admin.deliveries.created_at, excluded.created_at),
            -- only the first request says it (replay.py): a retry's keeps it
            replay_of = coalesce(excluded.replay_of, admin.deliveries.replay_of)
        """,
        [x["delivery_id"] for x in d],
        [x["webhook_id"] for x in d],
        # a later attempt seen first stands in as `retry` until the first one is projected
        [x["trigger"] if x["attempt"] == 1 else "retry" for x in d],
        [_ts(x.get("scheduled_for")) for x in d],
        [x["attempt"] for x in d],
        [e.occurred_at for e in events],
        [x.get("replay_of") for x in d],
    )
    await next_runs(
        conn,
        [e for e in events if e.data["trigger"] == "schedule" and e.data["attempt"] == 1],
    )


async def next_runs(conn: asyncpg.Connection, events: list[Event]) -> None:
    """The scheduler says where a timer went; newer news wins, older is ignored."""
    if not events:
        return
    await conn.execute(
        """
        update admin.webhooks w set next_run_at = x.nra, next_run_set_at = x.at
        from (
            select distinct on (wh) wh, nra, at
            from unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) as u(wh, nra, at)
            order by wh, at desc
        ) x
        where w.id = x.wh and w.enabled and w.disabled_at is null and w.next_run_set_at <= x.at
        """,
        [e.data["webhook_id"] for e in events],
        [_ts(e.data.get("next_run_at")) for e in events],
        [e.occurred_at for e in events],
    )


async def deliveries_finished(conn: asyncpg.Connection, events: list[Event]) -> None:
    """Attempts ended: success, final failure, or failure with a retry to come."""
    if not events:
        return
    logged = [e for e in events if e.data.get("request_body") is not None]
    if logged:  # no HTTP attempt behind the others (a retry cancelled by the scheduler)
        d = [e.data for e in logged]
        await conn.execute(
            """
            with attempts as (
                insert into admin.delivery_attempts
                    (delivery_id, attempt, response_status, error_message, duration_ms,
                     started_at, request_body_truncated)
                select * from unnest($1::bigint[], $2::int[], $4::int[], $6::text[],
                                     $7::int[], $8::timestamptz[], $9::bool[])
                on conflict (delivery_id, attempt) do nothing
            )
            -- The bodies, while the delivery's bucket keeps its attempt logs (retention
            -- drops them whole after CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS): a rebuild
            -- then writes the bodies the live projection still has, no more.
            insert into admin.attempt_logs (delivery_id, attempt, request_body, response_body)
            select x.d, x.a, x.req, x.res
            from unnest($1::bigint[], $2::int[], $3::text[], $5::text[]) as x(d, a, req, res)
            where exists (select 1 from eventstore.buckets b
                          where x.d >= b.lo and x.d < b.hi and b.logs_dropped_at is null)
            on conflict (delivery_id, attempt) do nothing
            """,
            [x["delivery_id"] for x in d],
            [x["attempt"] for x in d],
            [x["request_body"] for x in d],
            [x.get("response_status") for x in d],
            [x.get("response_body") for x in d],
            [x.get("error") for x in d],
            [x.get("duration_ms") or 0 for x in d],
            [_ts(x.get("started_at")) or e.occurred_at for x, e in zip(d, logged, strict=True)],
            [bool(x.get("request_body_truncated")) for x in d],
        )
    final = [e.type != EventType.DELIVERY_ATTEMPT_FAILED for e in events]
    d = [e.data for e in events]
    await conn.execute(
        """
        insert into admin.deliveries
            (id, cron_webhook_id, status, trigger, scheduled_for, attempt, response_status,
             duration_ms, error, created_at, completed_at, next_attempt_at)
        select * from unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[],
                             $5::timestamptz[], $6::int[], $7::int[], $8::int[], $9::text[],
                             $10::timestamptz[], $11::timestamptz[], $12::timestamptz[])
        on conflict (id) do update set
            status = excluded.status, attempt = excluded.attempt,
            next_attempt_at = excluded.next_attempt_at,
            trigger = case when excluded.attempt = 1
                           then excluded.trigger else admin.deliveries.trigger end,
            response_status = excluded.response_status, duration_ms = excluded.duration_ms,
            error = excluded.error, completed_at = excluded.completed_at
        where admin.deliveries.attempt <= excluded.attempt
          and admin.deliveries.status = 'pending'
        """,
        [x["delivery_id"] for x in d],
        [x["webhook_id"] for x in d],
        [x["status"] if f else "pending" for x, f in zip(d, final, strict=True)],
        ["retry" if x["attempt"] > 1 else x["trigger"] for x in d],
        [_ts(x.get("scheduled_for")) for x in d],
        [x["attempt"] for x in d],
        [x.get("response_status") for x in d],
        [x.get("duration_ms") for x in d],
        [x.get("error") for x in d],
        [e.occurred_at for e in events],
        [e.occurred_at if f else None for e, f in zip(events, final, strict=True)],
        # a retry to come (delivery.attempt_failed): when
        [None if f else _ts(x.get("retry_at")) for x, f in zip(d, final, strict=True)],
    )
    await last_deliveries(conn, [e for e, f in zip(events, final, strict=True) if f])


async def last_deliveries(conn: asyncpg.Connection, events: list[Event]) -> None:
    """The latest finished delivery, by time then id, whatever order they arrive in."""
    if not events:
        return
    await conn.execute(
        """
        update admin.webhooks w set
            last_delivery_at = x.at, last_delivery_status = x.status, last_delivery_id = x.id
        from (
            select distinct on (wh) wh, at, status, id
            from unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[])
                as u(wh, at, status, id)
            order by wh, at desc, id desc
        ) x
        where w.id = x.wh and (w.last_delivery_at is null
                               or (w.last_delivery_at, w.last_delivery_id) < (x.at, x.id))
        """,
        [e.data["webhook_id"] for e in events],
        [e.occurred_at for e in events],
        [e.data["status"] for e in events],
        [e.data["delivery_id"] for e in events],
    )


def skip_reason(d: dict[str, Any]) -> str:
    count = d.get("skipped_count", 1)
    if d.get("reason") == "missed":
        return (
            f"skipped {count} missed slot{'s' if count != 1 else ''} "
            f"from {d.get('first_skipped', d['scheduled_for'])} (catchUpPolicy {d.get('policy')})"
        )
    if d.get("reason") == "concurrency":
        return "skipped: an earlier delivery was still pending (concurrencyPolicy FORBID)"
    if d.get("reason") == "still_running":
        # concurrencyPolicy DELAY, a slot already waiting (CONTRACT §13): the reason itself
        return "still_running"
    if d.get("reason") == "budget":
        # maxDeliveriesPerDay spent (CONTRACT §13: "shown as skipped with error `budget`")
        return "budget"
    if d.get("reason") in ("deleted", "disabled"):
        return f"skipped: the webhook was {d['reason']} while the delivery waited its turn"
    return f"skipped: {d.get('reason')}"


async def deliveries_skipped(conn: asyncpg.Connection, events: list[Event]) -> None:
    """Records of slots that were not delivered (catch-up policy, concurrency policy)."""
    if not events:
        return
    d = [e.data for e in events]
    await conn.execute(
        """
        insert into admin.deliveries
            (id, cron_webhook_id, status, trigger, scheduled_for, attempt, error, created_at,
             completed_at)
        select id, wh, 'skipped', trg, sf, 0, err, at, at
        from unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[],
                    $6::timestamptz[]) as x(id, wh, trg, sf, err, at)
        on conflict (id) do update set
            status = 'skipped', error = excluded.error, completed_at = excluded.completed_at
        """,
        [x["delivery_id"] for x in d],
        [x["webhook_id"] for x in d],
        [x.get("trigger", "schedule") for x in d],
        [_ts(x.get("scheduled_for")) for x in d],
        [skip_reason(x) for x in d],
        [e.occurred_at for e in events],
    )
    await next_runs(conn, [e for e in events if "next_run_at" in e.data])


async def notes_changed(conn: asyncpg.Connection, events: list[Event]) -> None:
    if not events:
        return
    d = [e.data for e in events]
    await conn.execute(
        """
        insert into admin.notes
            (path, content_hash, version, depth, updated_at, updated_by, content, event, removed)
        select * from unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[],
                             $6::text[], $7::text[], $8::text[], $9::bool[])
        on conflict (path) do update set
            content_hash = excluded.content_hash, version = excluded.version,
            depth = excluded.depth, updated_at = excluded.updated_at,
            updated_by = excluded.updated_by, content = excluded.content,
            event = excluded.event, removed = excluded.removed
        where admin.notes.version < excluded.version
        """,
        [x["path"] for x in d],
        [x.get("content_hash") for x in d],
        [x["version"] for x in d],
        [x["depth"] for x in d],
        [e.occurred_at for e in events],
        [x["writer"] for x in d],
        [x.get("content") or "" for x in d],
        # events written before `event` was recorded: the first version created the note
        [x.get("event") or ("create" if x["version"] == 1 else "update") for x in d],
        [x.get("event") == "remove" for x in d],
    )
