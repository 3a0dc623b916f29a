"""Admin read models (webhooks, deliveries, attempts, notes, agent jobs, alerts),
projected from the event store.

Projection is deterministic in the events alone (their data and `occurred_at`, never
"now"), so replaying history rebuilds identical tables. It runs inline, in the
transaction of an admin command (a query right after a mutation sees it), and in the live
projector (projector.py), which tails the event store in commit order and applies
batches set-based (`apply_batch`). Every handler is idempotent — the projector applies
again what a command applied inline — and tolerates events of different streams in any
order (a delivery outcome before its request): they upsert instead of assuming a row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_admin import projection_batches as batches
from cronhooks_admin import projection_lanes as lanes
from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import CHANGE, Event, EventType
from cronhooks_common.relay import publish_rounds
from cronhooks_common.webhooks import CHANGE_CONFIG_FIELDS

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


def _later_fields(config: dict[str, Any]) -> tuple[str, list[str], int, int | None]:
    """execution_group, attach_notes, jitter_seconds, max_deliveries_per_day: fields added
    to the configuration after its first shape (CONTRACT §13), so events written before
    them lack them ("", [], 0, no limit)."""
    return (
        config.get("execution_group") or "",
        list(config.get("attach_notes") or []),
        int(config.get("jitter_seconds") or 0),
        config.get("max_deliveries_per_day"),
    )


async def _webhook_created(conn: asyncpg.Connection, event: Event) -> None:
    if event.data.get("kind") == CHANGE:
        await _change_webhook_created(conn, event)
        return
    c = event.data["config"]
    await conn.execute(
        """
        insert into admin.webhooks
            (id, stream_version, url, cron_schedule, timezone, instruction, has_secret,
             pass_api_key, timeout_seconds, max_depth, max_retries, enabled, description,
             read_patterns, write_patterns, concurrency_policy, catch_up_policy,
             misfire_grace_seconds, next_run_at, created_at, created_by, updated_at,
             next_run_set_at, execution_group, attach_notes, jitter_seconds,
             max_deliveries_per_day)
        values ($1, $2, $3, $4, $5, $6, true, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                $17, $18, $19, $20, $19, $19, $21, $22, $23, $24)
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
        *_later_fields(c),
    )


async def _webhook_updated(conn: asyncpg.Connection, event: Event) -> None:
    if event.data.get("kind") == CHANGE:
        await _change_webhook_updated(conn, event)
        return
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
            disabled_reason = case when $21 then null else disabled_reason end,
            execution_group = $22, attach_notes = $23, jitter_seconds = $24,
            max_deliveries_per_day = $25
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
        *_later_fields(c),
    )


_CHANGE_COLUMNS = CHANGE_CONFIG_FIELDS  # one column each


async def _change_webhook_created(conn: asyncpg.Connection, event: Event) -> None:
    c = event.data["config"]
    columns = ", ".join(_CHANGE_COLUMNS)
    values = ", ".join(f"${i}" for i in range(5, 5 + len(_CHANGE_COLUMNS)))
    await conn.execute(
        f"""
        insert into admin.webhooks
            (id, stream_version, kind, has_secret, created_at, created_by, updated_at,
             {columns})
        values ($1, $2, 'change', true, $3, $4, $3, {values})
        on conflict (id) do nothing
        """,
        event.data["webhook_id"],
        event.version,
        event.occurred_at,
        event.actor,
        *(c[k] for k in _CHANGE_COLUMNS),
    )


async def _change_webhook_updated(conn: asyncpg.Connection, event: Event) -> None:
    c = event.data["config"]
    changed = set(event.data.get("changed", []))
    sets = ", ".join(f"{k} = ${i}" for i, k in enumerate(_CHANGE_COLUMNS, start=5))
    await conn.execute(
        f"""
        update admin.webhooks set stream_version = $2, updated_at = $3,
            failures_reset_at = case when $4 then $3 else failures_reset_at end,
            disabled_reason = case when $4 then null else disabled_reason end,
            {sets}
        where id = $1 and stream_version < $2
        """,
        event.data["webhook_id"],
        event.version,
        event.occurred_at,
        "enabled" in changed and c["enabled"],  # re-enabling resets the failure count
        *(c[k] for k in _CHANGE_COLUMNS),
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


async def _alert_raised(conn: asyncpg.Connection, event: Event) -> None:
    """Raised, or raised again when its webhook is disabled: `raised_at` is the first."""
    d = event.data
    await conn.execute(
        """
        insert into admin.alerts
            (id, webhook_id, kind, stream_version, raised_at, consecutive_failures,
             last_error, disabled)
        values ($1, $2, $3, $4, $5, $6, $7, $8)
        on conflict (id) do update set
            stream_version = excluded.stream_version,
            consecutive_failures = excluded.consecutive_failures,
            last_error = excluded.last_error, disabled = excluded.disabled
        where admin.alerts.stream_version < excluded.stream_version
        """,
        d["alert_id"],
        d["webhook_id"],
        d["kind"],
        event.version,
        event.occurred_at,
        d["consecutive_failures"],
        d.get("last_error"),
        d["disabled"],
    )


async def _alert_resolved(conn: asyncpg.Connection, event: Event) -> None:
    d = event.data
    await conn.execute(
        """
        update admin.alerts set stream_version = $2, resolved_at = $3,
            consecutive_failures = $4, last_error = $5, disabled = $6
        where id = $1 and stream_version < $2
        """,
        d["alert_id"],
        event.version,
        event.occurred_at,
        d["consecutive_failures"],
        d.get("last_error"),
        d["disabled"],
    )


# Rare events, applied one by one (in their round, before the batched kinds).
HANDLERS: dict[str, Apply] = {
    EventType.WEBHOOK_CREATED: _webhook_created,
    EventType.WEBHOOK_UPDATED: _webhook_updated,
    EventType.WEBHOOK_DELETED: _webhook_deleted,
    EventType.WEBHOOK_DISABLED: _webhook_disabled,
    EventType.WEBHOOK_SECRET_ROTATED: _webhook_secret_rotated,
    EventType.TRIGGER_FIRED: _trigger_fired,
    EventType.ALERT_RAISED: _alert_raised,
    EventType.ALERT_RESOLVED: _alert_resolved,
}
Batch = Callable[[asyncpg.Connection, list[Event]], Awaitable[None]]
# The hot kinds: one statement per kind and round (projection_batches.py).
BATCHED: dict[str, Batch] = {
    EventType.DELIVERY_REQUESTED: batches.deliveries_requested,
    EventType.DELIVERY_SUCCEEDED: batches.deliveries_finished,
    EventType.DELIVERY_FAILED: batches.deliveries_finished,
    EventType.DELIVERY_ATTEMPT_FAILED: batches.deliveries_finished,
    EventType.DELIVERY_SKIPPED: batches.deliveries_skipped,
    EventType.DELIVERY_QUEUED: lanes.deliveries_queued,
    EventType.DELIVERY_RELEASED: lanes.deliveries_released,
    EventType.NOTE_CHANGED: batches.notes_changed,
}
PROJECTED = frozenset(HANDLERS) | frozenset(BATCHED)


async def apply_batch(conn: asyncpg.Connection, events: Sequence[Event]) -> None:
    """Project `events` (in store order) set-based, with the same result as one by one.

    Rounds hold at most one event per stream, in version order, so no statement touches
    one row twice; within a round the webhook events go first (a webhook is created before
    its first delivery is projected), then one statement per batched kind."""
    for round_ in publish_rounds([e for e in events if e.type in PROJECTED]):
        for event in round_:
            handler = HANDLERS.get(event.type)
            if handler is not None:
                await handler(conn, event)
        kinds: dict[Batch, list[Event]] = defaultdict(list)
        for event in round_:
            batch = BATCHED.get(event.type)
            if batch is not None:
                kinds[batch].append(event)
        for batch, of_kind in kinds.items():
            await batch(conn, of_kind)
