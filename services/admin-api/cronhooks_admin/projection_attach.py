"""Read model of a cron webhook's `attach_notes` (CONTRACT §13; absent from configurations
written before it: []). Idempotent, like every projection."""

from __future__ import annotations

import asyncpg

from cronhooks_common.events import Event


async def webhook_attach_notes(conn: asyncpg.Connection, event: Event) -> None:
    """After `webhook.created`/`webhook.updated` of a cron webhook was projected: its
    attachNotes, if the row is at this event's version (a newer event already projected
    wins)."""
    await conn.execute(
        "update admin.webhooks set attach_notes = $3"
        " where id = $1 and stream_version = $2 and attach_notes <> $3",
        event.data["webhook_id"],
        event.version,
        list(event.data["config"].get("attach_notes") or []),
    )
