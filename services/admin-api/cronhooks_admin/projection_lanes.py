"""Read models of concurrencyPolicy DELAY and execution groups (CONTRACT §13); a webhook's
group itself is a column of its row (projection.py).

* a delivery's wait: `delivery.queued` sets `queued_since`, `delivery.released` sets
  `queued_ms` (measured by the dispatcher that released it, so a rebuild gives the same).

Idempotent, like every projection: applying an event again writes the same values.
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.events import Event


async def deliveries_queued(conn: asyncpg.Connection, events: list[Event]) -> None:
    if not events:
        return
    await conn.execute(
        """
        update admin.deliveries d set queued_since = x.at
        from unnest($1::bigint[], $2::timestamptz[]) as x(id, at)
        where d.id = x.id
        """,
        [e.data["delivery_id"] for e in events],
        [e.occurred_at for e in events],
    )


async def deliveries_released(conn: asyncpg.Connection, events: list[Event]) -> None:
    if not events:
        return
    await conn.execute(
        """
        update admin.deliveries d set queued_ms = x.ms
        from unnest($1::bigint[], $2::int[]) as x(id, ms)
        where d.id = x.id
        """,
        [e.data["delivery_id"] for e in events],
        [e.data["queued_ms"] for e in events],
    )
