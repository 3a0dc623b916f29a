"""Turn `webhook.*` events into the scheduler's webhook copies and cron timers.

Runs inside the consumer's transaction (handlers.py: one handler per event type). Every
change to a timer ends with a NOTIFY on `cronhooks_timers`, which Postgres delivers at
commit to every scheduler replica's loop: a new or moved slot is picked up at once, not
at the next tick.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import msgspec
import structlog

from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import (
    CHANGE,
    ConfigData,
    Event,
    WebhookConfig,
    WebhookConfigured,
    WebhookDeleted,
    WebhookDisabled,
)
from cronhooks_common.jitter import jitter_offset
from cronhooks_common.webhooks import SCHEDULE_FIELDS
from cronhooks_scheduler import queries, webhook_copy
from cronhooks_scheduler.webhook_copy import CopiedConfig, Copy, schedule_of

log = structlog.get_logger(__name__)

TIMERS_CHANNEL = "cronhooks_timers"


def cron_key(webhook_id: int) -> str:
    return f"cron:{webhook_id}"


def next_slot(webhook_id: int, config: WebhookConfig, after: datetime) -> datetime | None:
    """The first slot after `after`, or None for a paused webhook or an unusable schedule."""
    if not config.enabled:
        return None
    try:
        schedule = CronSchedule.parse(config.cron_schedule or "", config.timezone or "")
    except CronError:
        # Commands validate before appending, so this only guards against bad history.
        log.error("cron_schedule_invalid", webhook_id=webhook_id)
        return None
    return schedule.next_after(after)


async def set_cron_timer(
    conn: asyncpg.Connection, webhook_id: int, due_at: datetime | None
) -> None:
    if due_at is None:
        await conn.execute(queries.DELETE_TIMER, cron_key(webhook_id))
    else:
        await conn.execute(queries.SET_CRON_TIMER, cron_key(webhook_id), webhook_id, due_at)
    await conn.execute(queries.NOTIFY, TIMERS_CHANNEL)


async def move_cron_timer(conn: asyncpg.Connection, webhook_id: int, shift: timedelta) -> None:
    """Move a webhook's pending cron timer by `shift` (its slot is due_at - offset)."""
    if not shift:
        return
    await conn.execute(queries.SHIFT_TIMER, cron_key(webhook_id), shift)
    await conn.execute(queries.NOTIFY, TIMERS_CHANNEL)


def _offset(webhook_id: int, config: WebhookConfig) -> timedelta:
    return jitter_offset(webhook_id, config.jitter_seconds or 0)


async def on_webhook_configured(
    conn: asyncpg.Connection, event: Event, payload: WebhookConfigured
) -> None:
    """`webhook.created`, `webhook.updated`: the copy takes the configuration, and the
    timer follows the schedule."""
    webhook_id, config = payload.webhook_id, payload.config
    fresh, old = await webhook_copy.lock(conn, webhook_id, event)
    if not fresh:
        return
    changed = set(payload.changed)
    gone = old is not None and old.gone
    if "enabled" in changed and config.enabled:
        gone = False  # re-enabled by an admin
    settings: ConfigData = msgspec.to_builtins(config)
    copied: CopiedConfig = {**settings, "webhook_id": webhook_id}
    await webhook_copy.save(conn, webhook_id, event, Copy(copied, gone=gone))
    if not config.enabled or payload.kind == CHANGE:
        # (A change webhook has no schedule: its copy is kept for its retries' targets.)
        await set_cron_timer(conn, webhook_id, None)
    elif old is None or changed & SCHEDULE_FIELDS:
        # Created, rescheduled or resumed: the next slot after the change, never a catch-up
        # of slots from before it. (The event's own time, not "now": a late-processed
        # change still yields exactly the slot admin-api reports as nextRunAt.) The timer
        # is due at slot + the jitter offset (CONTRACT §13); nextRunAt stays the slot.
        slot = next_slot(webhook_id, config, event.occurred_at)
        due = None if slot is None else slot + _offset(webhook_id, config)
        await set_cron_timer(conn, webhook_id, due)
    elif "jitter_seconds" in changed:
        # The pending slot stays; only its send time moves to slot + the new offset (at
        # once: the change is live, not from the next slot on).
        shift = _offset(webhook_id, config) - schedule_of(old.config).offset(webhook_id)
        await move_cron_timer(conn, webhook_id, shift)
    log.info("webhook_projected", webhook_id=webhook_id, event_type=event.type)


async def on_webhook_disabled(
    conn: asyncpg.Connection, event: Event, payload: WebhookDisabled
) -> None:
    """Disabled by the platform: paused, and its pending retries are cancelled (`gone`)."""
    fresh, old = await webhook_copy.lock(conn, payload.webhook_id, event)
    if not fresh:
        return
    copied: CopiedConfig = {**(old.config if old is not None else {}), "enabled": False}
    await webhook_copy.save(conn, payload.webhook_id, event, Copy(copied, gone=True))
    await set_cron_timer(conn, payload.webhook_id, None)
    log.info("webhook_projected", webhook_id=payload.webhook_id, event_type=event.type)


async def on_webhook_deleted(
    conn: asyncpg.Connection, event: Event, payload: WebhookDeleted
) -> None:
    fresh, old = await webhook_copy.lock(conn, payload.webhook_id, event)
    if not fresh:
        return
    copy = Copy({}) if old is None else old
    await webhook_copy.save(
        conn, payload.webhook_id, event, Copy(copy.config, deleted=True, gone=copy.gone)
    )
    await set_cron_timer(conn, payload.webhook_id, None)
    log.info("webhook_projected", webhook_id=payload.webhook_id, event_type=event.type)
