"""Turn `webhook.*` events into the scheduler's webhook copies and cron timers.

Runs inside the consumer's transaction. Every change to a timer ends with a NOTIFY on
`cronhooks_timers`, which Postgres delivers at commit to every scheduler replica's loop:
a new or moved slot is picked up at once, not at the next tick.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg
import structlog

from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import CHANGE, Event, EventType
from cronhooks_common.jitter import offset_of
from cronhooks_common.webhooks import SCHEDULE_FIELDS

log = structlog.get_logger(__name__)

TIMERS_CHANNEL = "cronhooks_timers"

HANDLED = (
    EventType.WEBHOOK_CREATED,
    EventType.WEBHOOK_UPDATED,
    EventType.WEBHOOK_DELETED,
    EventType.WEBHOOK_DISABLED,
)


def cron_key(webhook_id: int) -> str:
    return f"cron:{webhook_id}"


def next_slot(config: dict[str, Any], after: datetime) -> datetime | None:
    """The first slot after `after`, or None for a paused webhook or an unusable schedule."""
    if not config.get("enabled", True):
        return None
    try:
        return CronSchedule.parse(config["cron_schedule"], config["timezone"]).next_after(after)
    except CronError:
        # Commands validate before appending, so this only guards against bad history.
        log.error("cron_schedule_invalid", webhook_id=config.get("webhook_id"))
        return None


async def set_cron_timer(
    conn: asyncpg.Connection, webhook_id: int, due_at: datetime | None
) -> None:
    if due_at is None:
        await conn.execute(
            "delete from scheduler.timers where timer_key = $1", cron_key(webhook_id)
        )
    else:
        await conn.execute(
            """
            insert into scheduler.timers (timer_key, kind, subject, due_at)
            values ($1, 'cron', $2, $3)
            on conflict (timer_key) do update set due_at = excluded.due_at
            """,
            cron_key(webhook_id),
            webhook_id,
            due_at,
        )
    await conn.execute("select pg_notify($1, '')", TIMERS_CHANNEL)


async def move_cron_timer(conn: asyncpg.Connection, webhook_id: int, shift: timedelta) -> None:
    """Move a webhook's pending cron timer by `shift` (its slot is due_at - offset)."""
    if not shift:
        return
    await conn.execute(
        "update scheduler.timers set due_at = due_at + $2 where timer_key = $1",
        cron_key(webhook_id),
        shift,
    )
    await conn.execute("select pg_notify($1, '')", TIMERS_CHANNEL)


async def on_webhook_event(conn: asyncpg.Connection, event: Event) -> None:
    webhook_id = int(event.data["webhook_id"])
    row = await conn.fetchrow(
        "select stream_version, config, gone from scheduler.webhooks"
        " where webhook_id = $1 for update",
        webhook_id,
    )
    if row is not None and row["stream_version"] >= event.version:
        return  # an older event arriving late: the newer state is already applied
    config = dict(row["config"]) if row is not None else {}
    old = config
    deleted = False
    gone = bool(row["gone"]) if row is not None else False
    reschedule = True
    if event.type in (EventType.WEBHOOK_CREATED, EventType.WEBHOOK_UPDATED):
        new = event.data["config"]
        changed = set(event.data.get("changed", new.keys()))
        reschedule = row is None or bool(changed & SCHEDULE_FIELDS)
        config = {**new, "webhook_id": webhook_id}
        if "enabled" in changed and new.get("enabled"):
            gone = False  # re-enabled by an admin
    elif event.type == EventType.WEBHOOK_DISABLED:
        config["enabled"] = False
        gone = True
    elif event.type == EventType.WEBHOOK_DELETED:
        deleted = True
    await conn.execute(
        """
        insert into scheduler.webhooks (webhook_id, stream_version, config, deleted, gone)
        values ($1, $2, $3, $4, $5)
        on conflict (webhook_id) do update
            set stream_version = excluded.stream_version,
                config = excluded.config,
                deleted = excluded.deleted,
                gone = excluded.gone
        """,
        webhook_id,
        event.version,
        config,
        deleted,
        gone,
    )
    if deleted or not config.get("enabled", True) or event.data.get("kind") == CHANGE:
        # (A change webhook has no schedule: its copy is kept for its retries' targets.)
        await set_cron_timer(conn, webhook_id, None)
    elif reschedule:
        # Created, rescheduled or resumed: the next slot after the change, never a catch-up
        # of slots from before it. (The event's own time, not "now": a late-processed
        # change still yields exactly the slot admin-api reports as nextRunAt.) The timer
        # is due at slot + the jitter offset (CONTRACT §13); nextRunAt stays the slot.
        slot = next_slot(config, event.occurred_at)
        due = None if slot is None else slot + offset_of(webhook_id, config)
        await set_cron_timer(conn, webhook_id, due)
    elif "jitter_seconds" in event.data.get("changed", ()):
        # The pending slot stays; only its send time moves to slot + the new offset (at
        # once: the change is live, not from the next slot on).
        shift = offset_of(webhook_id, config) - offset_of(webhook_id, old)
        await move_cron_timer(conn, webhook_id, shift)
    log.info("webhook_projected", webhook_id=webhook_id, event_type=event.type)
