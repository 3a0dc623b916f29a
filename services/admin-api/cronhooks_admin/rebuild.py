"""`cronhooks projections rebuild`: drop the admin read models and replay the event store.

Runs in one transaction: the read models are emptied (with the inbox), every event is fed
through `projection.apply` in store order, and the last position is recorded as the
checkpoint. Readers keep seeing the old tables until the commit. The live consumer waits
on the table locks meanwhile; afterwards the inbox makes it skip what the replay applied
and apply what committed after it. Projections depend only on the events, not on "now"
or on the order of streams, so the result equals the live tables.
"""

from __future__ import annotations

import asyncpg
import structlog

from cronhooks_admin import projection
from cronhooks_admin.commands import INBOX
from cronhooks_common import db, eventstore
from cronhooks_common.consumer import claim_event

log = structlog.get_logger(__name__)

READ_MODELS = (
    "admin.webhooks",
    "admin.deliveries",
    "admin.delivery_attempts",
    "admin.notes",
    "admin.inbox",
)
BATCH = 5000


async def rebuild(conn: asyncpg.Connection) -> tuple[int, int]:
    """Rebuild in the caller's connection; return (events replayed, last position)."""
    replayed, position = 0, 0
    async with conn.transaction():
        await conn.execute(f"truncate {', '.join(READ_MODELS)}")
        while batch := await eventstore.read_all(conn, after_position=position, limit=BATCH):
            for _, event in batch:
                if event.type in projection.HANDLERS:
                    await claim_event(conn, INBOX, event.event_id)
                    await projection.apply(conn, event)
                    replayed += 1
            position = batch[-1][0]
        await conn.execute(
            """
            insert into admin.projection_checkpoints (name, position) values ('admin', $1)
            on conflict (name) do update set position = excluded.position, updated_at = now()
            """,
            position,
        )
    log.info("projections_rebuilt", events=replayed, position=position)
    return replayed, position


async def rebuild_database(dsn: str) -> tuple[int, int]:
    conn = await db.connect(dsn, name="rebuild")
    try:
        return await rebuild(conn)
    finally:
        await conn.close()
