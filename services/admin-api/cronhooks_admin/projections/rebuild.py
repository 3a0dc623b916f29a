"""`cronhooks projections rebuild`: drop the admin read models and replay the event store.

Runs in one transaction, holding the live projector's lock (it waits meanwhile): the read
models are emptied, every committed event is replayed in commit order with the same
set-based `apply_batch` the live projector uses, and the live checkpoint is set
to where the replay stopped — events committed later are the projector's, as before.
Readers keep seeing the old tables until the commit. Projections depend only on the
events, not on "now" or on the order of streams, so the result equals the live tables.
"""

from __future__ import annotations

import asyncpg
import structlog

from cronhooks_admin.projections import queries as sql
from cronhooks_admin.projections.apply import apply_batch
from cronhooks_admin.projections.projector import PROJECTOR_LOCK, save_checkpoint
from cronhooks_common import db
from cronhooks_common.tail import START, read_after

log = structlog.get_logger(__name__)

BATCH = 5000


async def rebuild(conn: asyncpg.Connection) -> tuple[int, int]:
    """Rebuild in the caller's connection; return (events replayed, last position)."""
    replayed, checkpoint = 0, START
    async with conn.transaction():
        await conn.execute(sql.LOCK, PROJECTOR_LOCK)
        await conn.execute(sql.TRUNCATE_READ_MODELS)
        while True:
            events, checkpoint = await read_after(conn, checkpoint, BATCH)
            if not events:
                break
            await apply_batch(conn, events)
            replayed += len(events)
        await save_checkpoint(conn, checkpoint)
    log.info("projections_rebuilt", events=replayed, position=checkpoint.position)
    return replayed, checkpoint.position


async def rebuild_database(dsn: str) -> tuple[int, int]:
    conn = await db.connect(dsn, name="rebuild")
    try:
        return await rebuild(conn)
    finally:
        await conn.close()
