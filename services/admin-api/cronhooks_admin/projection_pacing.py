"""Read model of a cron webhook's pacing (CONTRACT §13): `jitter_seconds` and
`max_deliveries_per_day`, both absent from configurations written before them (0 and no
limit).

Idempotent, like every projection: applying an event again writes the same values.
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.events import Event


async def webhook_pacing(conn: asyncpg.Connection, event: Event) -> None:
    """After `webhook.created`/`webhook.updated` of a cron webhook was projected: its
    pacing, if the row is at this event's version (a newer event already projected wins)."""
    config = event.data["config"]
    await conn.execute(
        """
        update admin.webhooks set jitter_seconds = $3, max_deliveries_per_day = $4
        where id = $1 and stream_version = $2
          and (jitter_seconds, max_deliveries_per_day) is distinct from ($3, $4)
        """,
        event.data["webhook_id"],
        event.version,
        int(config.get("jitter_seconds") or 0),
        config.get("max_deliveries_per_day"),
    )
