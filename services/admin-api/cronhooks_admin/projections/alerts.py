"""admin.alerts from `alert.*` (CONTRACT §12): one row per alert, as its latest event says
(`stream_version` keeps an older event from overwriting a newer one)."""

from __future__ import annotations

import asyncpg

from cronhooks_admin.projections import queries as sql
from cronhooks_common.events import AlertRaised, AlertResolved, Event


async def on_alert_raised(conn: asyncpg.Connection, event: Event, p: AlertRaised) -> None:
    await conn.execute(
        sql.ALERT_RAISED,
        p.alert_id,
        p.webhook_id,
        p.kind,
        event.version,
        event.occurred_at,
        p.consecutive_failures,
        p.last_error,
        p.disabled,
    )


async def on_alert_resolved(conn: asyncpg.Connection, event: Event, p: AlertResolved) -> None:
    await conn.execute(
        sql.ALERT_RESOLVED,
        p.alert_id,
        event.version,
        event.occurred_at,
        p.consecutive_failures,
        p.last_error,
        p.disabled,
    )
