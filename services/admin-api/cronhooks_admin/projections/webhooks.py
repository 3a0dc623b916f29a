"""admin.webhooks from `webhook.*` events: one row per webhook of either kind, its settings
in the columns queries.CONFIG_COLUMNS names. A deleted webhook keeps its row (its history
stays readable), marked `disabled_at`."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from cronhooks_admin.projections import queries as sql
from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import (
    CRON,
    UNSET,
    Event,
    WebhookConfig,
    WebhookCreated,
    WebhookDeleted,
    WebhookDisabled,
    WebhookSecretRotated,
    WebhookUpdated,
)
from cronhooks_common.webhooks import SCHEDULE_FIELDS


def config_values(config: WebhookConfig) -> list[object]:
    """The settings' column values, in queries.CONFIG_COLUMNS order."""
    values = []
    for field, absent in sql.CONFIG_COLUMNS.items():
        value = getattr(config, field)
        # as JSON's values: a list of cost limits is of structs the jsonb codec cannot write
        values.append(absent if value is UNSET else msgspec.to_builtins(value))
    return values


def next_run(config: WebhookConfig, after: datetime) -> datetime | None:
    """A cron webhook's next slot after `after`; None when paused (or of kind change)."""
    if not config.enabled or config.cron_schedule is UNSET or config.timezone is UNSET:
        return None
    try:
        return CronSchedule.parse(config.cron_schedule, config.timezone).next_after(after)
    except CronError:
        return None


async def on_webhook_created(conn: asyncpg.Connection, event: Event, p: WebhookCreated) -> None:
    cron = p.kind == CRON
    await conn.execute(
        sql.INSERT_WEBHOOK,
        p.webhook_id,
        event.version,
        p.kind,
        event.occurred_at,
        event.actor,
        next_run(p.config, event.occurred_at) if cron else None,
        event.occurred_at if cron else None,  # change webhooks have no next run to order
        *config_values(p.config),
    )
    await conn.execute(sql.COPY_PUBLIC_KEY, p.webhook_id)


async def on_webhook_updated(conn: asyncpg.Connection, event: Event, p: WebhookUpdated) -> None:
    changed = set(p.changed)
    reschedule = p.kind == CRON and bool(changed & SCHEDULE_FIELDS)
    await conn.execute(
        sql.UPDATE_WEBHOOK,
        p.webhook_id,
        event.version,
        event.occurred_at,
        reschedule,
        next_run(p.config, event.occurred_at) if reschedule else None,
        "enabled" in changed and p.config.enabled,  # re-enabling resets the failure count
        *config_values(p.config),
    )
    if "signature_scheme" in changed:  # switching to ED25519 may have made a key pair
        await conn.execute(sql.COPY_PUBLIC_KEY, p.webhook_id)


async def on_webhook_deleted(conn: asyncpg.Connection, event: Event, p: WebhookDeleted) -> None:
    await conn.execute(
        sql.DELETE_WEBHOOK, p.webhook_id, event.version, event.occurred_at, event.actor
    )


async def on_webhook_disabled(conn: asyncpg.Connection, event: Event, p: WebhookDisabled) -> None:
    await conn.execute(
        sql.DISABLE_WEBHOOK, p.webhook_id, event.version, p.reason, event.occurred_at
    )


async def on_webhook_secret_rotated(
    conn: asyncpg.Connection, event: Event, p: WebhookSecretRotated
) -> None:
    expires = None if p.previous_expires_at is UNSET else p.previous_expires_at
    await conn.execute(
        sql.ROTATE_WEBHOOK,
        p.webhook_id,
        event.version,
        event.occurred_at,
        None if expires is None else datetime.fromisoformat(expires),
    )
    await conn.execute(sql.COPY_PUBLIC_KEY, p.webhook_id)  # regenerating renews the pair
