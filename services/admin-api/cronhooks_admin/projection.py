"""Admin read models (webhooks, deliveries, attempts), projected from events.

`apply` is deterministic in the event alone (its data and `occurred_at`, never "now"), so
replaying history rebuilds identical tables. It runs both inline, in the transaction of
an admin command (a query right after a mutation sees it), and from the consumer for
events of other services; the inbox makes the second sighting of an event a no-op.
Handlers tolerate events arriving out of order across streams (a delivery outcome
before its request): they upsert instead of assuming a row exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import Event, EventType

Apply = Callable[[asyncpg.Connection, Event], Awaitable[None]]


def _ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def next_run(config: dict[str, Any], after: datetime) -> datetime | None:
    if not config["enabled"]:
        return None
    try:
        return CronSchedule.parse(config["cron_schedule"], config["timezone"]).next_after(after)
    except CronError:
        return None


async def _webhook_created(conn: asyncpg.Connection, event: Event) -> None:
    c = event.data["config"]
    await conn.execute(
        """
        insert into admin.webhooks
            (id, stream_version, url, cron_schedule, timezone, instruction, has_secret,
             pass_api_key, timeout_seconds, max_depth, max_retries, enabled, description,
             read_patterns, write_patterns, concurrency_policy, catch_up_policy,
             misfire_grace_seconds, next_run_at, created_at, created_by, updated_at,
             next_run_set_at)
        values ($1, $2, $3, $4, $5, $6, true, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                $17, $18, $19, $20, $19, $19)
        on conflict (id) do nothing
        """,
        event.data["webhook_id"],
        event.version,
        c["url"],
        c["cron_schedule"],
        c["timezone"],
        c["instruction"],
        c["pass_api_key"],
        c["timeout_seconds"],
        c["max_depth"],
        c["max_retries"],
        c["enabled"],
        c["description"],
        c["read_patterns"],
        c["write_patterns"],
        c["concurrency_policy"],
        c["catch_up_policy"],
        c["misfire_grace_seconds"],
        next_run(c, event.occurred_at),
        event.occurred_at,
        event.actor,
    )


async def _webhook_updated(conn: asyncpg.Connection, event: Event) -> None:
    c = event.data["config"]
    changed = set(event.data.get("changed", []))
    reschedule = bool(changed & {"cron_schedule", "timezone", "enabled"})
    await conn.execute(
        """
        update admin.webhooks set
            stream_version = $2, url = $3, cron_schedule = $4, timezone = $5,
            instruction = $6, pass_api_key = $7, timeout_seconds = $8, max_depth = $9,
            max_retries = $10, enabled = $11, description = $12, read_patterns = $13,
            write_patterns = $14, concurrency_policy = $15, catch_up_policy = $16,
            misfire_grace_seconds = $17, updated_at = $18,
            next_run_at = case when $19 and next_run_set_at <= $18 then $20 else next_run_at end,
            next_run_set_at = case when $19 then greatest(next_run_set_at, $18)
                                   else next_run_set_at end,
            failures_reset_at = case when $21 then $18 else failures_reset_at end,
            disabled_reason = case when $21 then null else disabled_reason end
        where id = $1 and stream_version < $2
        """,
        event.data["webhook_id"],
        event.version,
        c["url"],
        c["cron_schedule"],
        c["timezone"],
        c["instruction"],
        c["pass_api_key"],
        c["timeout_seconds"],
        c["max_depth"],
        c["max_retries"],
        c["enabled"],
        c["description"],
        c["read_patterns"],
        c["write_patterns"],
        c["concurrency_policy"],
        c["catch_up_policy"],
        c["misfire_grace_seconds"],
        event.occurred_at,
        reschedule,
        next_run(c, event.occurred_at),
        "enabled" in changed and c["enabled"],  # re-enabling resets the failure count
    )


async def _webhook_deleted(conn: asyncpg.Connection, event: Event) -> None:
    await conn.execute(
        """
        update admin.webhooks set stream_version = $2, enabled = false, next_run_at = null,
            next_run_set_at = greatest(next_run_set_at, $3),
            disabled_at = $3, disabled_by = $4, updated_at = $3
        where id = $1 and stream_version < $2
        """,
        event.data["webhook_id"],
        event.version,
        event.occurred_at,
        event.actor,
    )


async def _webhook_disabled(conn: asyncpg.Connection, event: Event) -> None:
    await conn.execute(
        """
        update admin.webhooks set stream_version = $2, enabled = false, next_run_at = null,
            next_run_set_at = greatest(next_run_set_at, $4),
            disabled_reason = $3, updated_at = $4
        where id = $1 and stream_version < $2
        """,
        event.data["webhook_id"],
        event.version,
        event.data.get("reason"),
        event.occurred_at,
    )


async def _webhook_secret_rotated(conn: asyncpg.Connection, event: Event) -> None:
    await conn.execute(
        "update admin.webhooks set stream_version = $2, updated_at = $3"
        " where id = $1 and stream_version < $2",
        event.data["webhook_id"],
        event.version,
        event.occurred_at,
    )


async def _next_run_from_scheduler(conn: asyncpg.Connection, event: Event) -> None:
    """The scheduler says where the timer went; newer news wins, older is ignored."""
    await conn.execute(
        """
        update admin.webhooks set next_run_at = $2, next_run_set_at = $3
        where id = $1 and enabled and disabled_at is null and next_run_set_at <= $3
        """,
        event.data["webhook_id"],
        _ts(event.data.get("next_run_at")),
        event.occurred_at,
    )


async def _delivery_requested(conn: asyncpg.Connection, event: Event) -> None:
    d = event.data
    await conn.execute(
        """
        insert into admin.deliveries
            (id, cron_webhook_id, status, trigger, scheduled_for, attempt, created_at)
        values ($1, $2, 'pending', $3, $4, $5, $6)
        on conflict (id) do update set
            attempt = greatest(admin.deliveries.attempt, excluded.attempt),
            -- the trigger of the latest attempt: a delivery being retried shows RETRY
            trigger = case when excluded.attempt > admin.deliveries.attempt
                           then excluded.trigger else admin.deliveries.trigger end,
            scheduled_for = excluded.scheduled_for,
            created_at = least(admin.deliveries.created_at, excluded.created_at)
        """,
        d["delivery_id"],
        d["webhook_id"],
        d["trigger"] if d["attempt"] == 1 else "retry",
        _ts(d.get("scheduled_for")),
        d["attempt"],
        event.occurred_at,
    )
    if d["trigger"] == "schedule" and d["attempt"] == 1:
        await _next_run_from_scheduler(conn, event)


async def _attempt_logged(conn: asyncpg.Connection, event: Event) -> None:
    d = event.data
    if d.get("request_body") is None:
        return  # no HTTP attempt behind it (a retry cancelled by the scheduler)
    await conn.execute(
        """
        insert into admin.delivery_attempts
            (delivery_id, attempt, request_body, response_status, response_body,
             error_message, duration_ms, started_at)
        values ($1, $2, $3, $4, $5, $6, $7, $8)
        on conflict (delivery_id, attempt) do nothing
        """,
        d["delivery_id"],
        d["attempt"],
        d["request_body"],
        d.get("response_status"),
        d.get("response_body"),
        d.get("error"),
        d.get("duration_ms") or 0,
        _ts(d.get("started_at")) or event.occurred_at,
    )


async def _delivery_finished(conn: asyncpg.Connection, event: Event) -> None:
    """An attempt ended: success, final failure, or failure with a retry to come."""
    d = event.data
    await _attempt_logged(conn, event)
    final = event.type != EventType.DELIVERY_ATTEMPT_FAILED
    status = d["status"] if final else "pending"
    await conn.execute(
        """
        insert into admin.deliveries
            (id, cron_webhook_id, status, trigger, scheduled_for, attempt, response_status,
             duration_ms, error, created_at, completed_at)
        values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
        on conflict (id) do update set
            status = excluded.status, attempt = excluded.attempt, trigger = excluded.trigger,
            response_status = excluded.response_status, duration_ms = excluded.duration_ms,
            error = excluded.error, completed_at = excluded.completed_at
        where admin.deliveries.attempt <= excluded.attempt
          and admin.deliveries.status = 'pending'
        """,
        d["delivery_id"],
        d["webhook_id"],
        status,
        "retry" if d["attempt"] > 1 else d["trigger"],
        _ts(d.get("scheduled_for")),
        d["attempt"],
        d.get("response_status"),
        d.get("duration_ms"),
        d.get("error"),
        event.occurred_at,
        event.occurred_at if final else None,
    )
    if final:
        # The latest finished delivery, by time then id, whatever order they arrive in.
        await conn.execute(
            """
            update admin.webhooks set
                last_delivery_at = $2, last_delivery_status = $3, last_delivery_id = $4
            where id = $1 and (last_delivery_at is null
                               or (last_delivery_at, last_delivery_id) < ($2, $4))
            """,
            d["webhook_id"],
            event.occurred_at,
            d["status"],
            d["delivery_id"],
        )


async def _delivery_skipped(conn: asyncpg.Connection, event: Event) -> None:
    """A record of slots that were not delivered (catch-up policy, concurrency policy)."""
    d = event.data
    count = d.get("skipped_count", 1)
    reason = (
        f"skipped {count} missed slot{'s' if count != 1 else ''} "
        f"from {d.get('first_skipped', d['scheduled_for'])} (catchUpPolicy {d.get('policy')})"
        if d.get("reason") == "missed"
        else "skipped: an earlier delivery was still pending (concurrencyPolicy FORBID)"
        if d.get("reason") == "concurrency"
        else f"skipped: {d.get('reason')}"
    )
    await conn.execute(
        """
        insert into admin.deliveries
            (id, cron_webhook_id, status, trigger, scheduled_for, attempt, error, created_at,
             completed_at)
        values ($1, $2, 'skipped', $3, $4, 0, $5, $6, $6)
        on conflict (id) do update set
            status = 'skipped', error = excluded.error, completed_at = excluded.completed_at
        """,
        d["delivery_id"],
        d["webhook_id"],
        d.get("trigger", "schedule"),
        _ts(d.get("scheduled_for")),
        reason,
        event.occurred_at,
    )
    if "next_run_at" in d:
        await _next_run_from_scheduler(conn, event)


async def _note_changed(conn: asyncpg.Connection, event: Event) -> None:
    d = event.data
    removed = d.get("event") == "remove"
    await conn.execute(
        """
        insert into admin.notes
            (path, content_hash, version, depth, updated_at, updated_by, content, event, removed)
        values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        on conflict (path) do update set
            content_hash = excluded.content_hash, version = excluded.version,
            depth = excluded.depth, updated_at = excluded.updated_at,
            updated_by = excluded.updated_by, content = excluded.content,
            event = excluded.event, removed = excluded.removed
        where admin.notes.version < excluded.version
        """,
        d["path"],
        d.get("content_hash"),
        d["version"],
        d["depth"],
        event.occurred_at,
        d["writer"],
        d.get("content") or "",
        # events written before `event` was recorded: the first version created the note
        d.get("event") or ("create" if d["version"] == 1 else "update"),
        removed,
    )


async def _trigger_fired(conn: asyncpg.Connection, event: Event) -> None:
    """The outcome of a one-shot: the job stays listed only while it is armed (a newer
    arming, with a later generation, is left alone)."""
    d = event.data
    await conn.execute(
        """
        update admin.agent_jobs set
            state = case when $4 = 'delivered' then 'fired' else 'failed' end,
            last_fired_at = $5, last_outcome = $4, last_error = $6, updated_at = $5
        where agent_id = $1 and job_id = $2 and generation = $3 and state = 'armed'
        """,
        d["agent_id"],
        d["job_id"],
        d["generation"],
        d["outcome"],
        event.occurred_at,
        d.get("error"),
    )


HANDLERS: dict[str, Apply] = {
    EventType.WEBHOOK_CREATED: _webhook_created,
    EventType.WEBHOOK_UPDATED: _webhook_updated,
    EventType.WEBHOOK_DELETED: _webhook_deleted,
    EventType.WEBHOOK_DISABLED: _webhook_disabled,
    EventType.WEBHOOK_SECRET_ROTATED: _webhook_secret_rotated,
    EventType.DELIVERY_REQUESTED: _delivery_requested,
    EventType.DELIVERY_SUCCEEDED: _delivery_finished,
    EventType.DELIVERY_FAILED: _delivery_finished,
    EventType.DELIVERY_ATTEMPT_FAILED: _delivery_finished,
    EventType.DELIVERY_SKIPPED: _delivery_skipped,
    EventType.NOTE_CHANGED: _note_changed,
    EventType.TRIGGER_FIRED: _trigger_fired,
}


async def apply(conn: asyncpg.Connection, event: Event) -> None:
    handler = HANDLERS.get(event.type)
    if handler is not None:
        await handler(conn, event)
