"""The admin read models as tables: a snapshot of them, waiting until they have caught up
with the event store, and `cronhooks projections rebuild` run as the operator runs it."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from cronhooks_common.settings import Settings
from tests.support import rabbit
from tests.support.inprocess import eventually
from tests.support.processes import cli_ok

TABLES = {
    "admin.webhooks": "id",
    "admin.deliveries": "id",
    "admin.delivery_attempts": "delivery_id, attempt",
    "admin.attempt_logs": "delivery_id, attempt",
    "admin.notes": "path",
    "admin.alerts": "id",
    # Not a read model (rebuild leaves it alone), but what costTotals shows: a rebuild
    # must leave it as live left it (CONTRACT §16.1).
    "shared.daily_costs": "webhook_id, day, unit",
    # The pause switch (CONTRACT §16.4): state, not a read model; a rebuild leaves it alone.
    "shared.delivery_pause": "id",
}


async def snapshot(dsn: str) -> dict[str, Any]:
    """Every row of each read model in TABLES, by table, in key order."""
    conn = await asyncpg.connect(dsn)
    try:
        out: dict[str, Any] = {
            t: [dict(r) for r in await conn.fetch(f"select * from {t} order by {k}")]
            for t, k in TABLES.items()
        }
        return out
    finally:
        await conn.close()


async def quiet(dsn: str, vhost: str) -> None:
    """Wait until every event is published, every consumer is drained and the admin
    projector has applied the last event of the store."""

    async def settled() -> bool:
        conn = await asyncpg.connect(dsn)
        try:
            outbox = await conn.fetchval("select count(*) from eventstore.outbox")
            caught_up = await conn.fetchval(
                """select (c.txid, c.position) = (e.txid, e.position)
                from admin.projection_checkpoints c,
                     (select txid, position from eventstore.events
                      order by txid desc, position desc limit 1) e
                where c.name = 'live'"""
            )
        finally:
            await conn.close()
        queues = [
            await rabbit.queue_depth(vhost, f"cronhooks.{q}")
            for q in ("scheduler", "dispatcher", "importer")
        ]
        return outbox == 0 and bool(caught_up) and queues == [0, 0, 0]

    await eventually(settled, timeout=30, interval=0.2)
    await asyncio.sleep(1.0)


async def rebuild(settings: Settings) -> str:
    """`cronhooks projections rebuild` in a process of its own on the test's database and
    vhost; what it printed (it must succeed)."""
    return await cli_ok(settings, "projections", "rebuild")
