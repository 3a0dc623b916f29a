"""Read model of a cron webhook's fields added after its first configuration shape
(CONTRACT §13), each absent from configurations written before it:

* `execution_group` (absent: "");
* `attach_notes` (absent: []);
* `jitter_seconds` (absent: 0) and `max_deliveries_per_day` (absent: no limit).

One statement for all of them, after the row itself was projected. Idempotent, like every
projection: applying an event again writes the same values.
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.events import Event


async def webhook_later_fields(conn: asyncpg.Connection, event: Event) -> None:
    """After `webhook.created`/`webhook.updated` of a cron webhook was projected: its later
    fields, if the row is at this event's version (a newer event already projected wins)."""
    config = event.data["config"]
    await conn.execute(
        """
        update admin.webhooks
        set execution_group = $3, attach_notes = $4,
            jitter_seconds = $5, max_deliveries_per_day = $6
        where id = $1 and stream_version = $2
          and (execution_group, attach_notes, jitter_seconds, max_deliveries_per_day)
              is distinct from ($3, $4, $5, $6)
        """,
        event.data["webhook_id"],
        event.version,
        config.get("execution_group") or "",
        list(config.get("attach_notes") or []),
        int(config.get("jitter_seconds") or 0),
        config.get("max_deliveries_per_day"),
    )
