"""The live projector: admin-api's read models follow the event store itself, not RabbitMQ.

It tails the event store in commit order (cronhooks_common.tail; over the partitions that
can still take events, live_tail.py) from its checkpoint, applies each batch set-based
(apply.apply_batch) and moves the checkpoint in the same transaction, so a
crash anywhere loses nothing and applies nothing twice (and applying twice would change
nothing: projections are idempotent). One replica projects at a time: the batch
transaction takes an advisory lock first, and a replica that cannot take it waits.

It wakes on `NOTIFY cronhooks_outbox` (sent at the commit of every append), polls every
second in case a notification was lost, and looks again after a few milliseconds when
committed events wait behind a transaction that is still running.
"""

from __future__ import annotations

import asyncio

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_admin.projections import queries as sql
from cronhooks_admin.projections.apply import apply_batch
from cronhooks_admin.projections.live_tail import LiveTail
from cronhooks_common.tail import Checkpoint, TailLoop

log = structlog.get_logger(__name__)

PROJECTOR_LOCK = 0x63726F6E_70726F6A  # "cronproj"
CATCH_UP_SECONDS = 5.0
PROJECTED = Counter("cronhooks_admin_projected_events_total", "Events applied by the projector")


async def save_checkpoint(conn: asyncpg.Connection, checkpoint: Checkpoint) -> None:
    """Where the live projection stands, in the transaction that applied up to it."""
    await conn.execute(sql.SAVE_CHECKPOINT, checkpoint.txid, checkpoint.position)


class Projector:
    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        *,
        batch_size: int = 2000,
        poll_seconds: float = 1.0,
    ) -> None:
        self._pool = pool
        self._tail = LiveTail()  # the partitions that can still take events, not all
        self._batch_size = batch_size
        self._loop = TailLoop(
            self.step,
            dsn,
            name="admin-projector",
            poll_seconds=poll_seconds,
            full=batch_size,
            unavailable="projector_database_unavailable",
        )

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def caught_up(self, timeout: float = CATCH_UP_SECONDS) -> bool:
        """Wait until every event committed before this call is projected: read-your-writes
        for writes admin-api forwards instead of making (admin note writes). Any
        transaction that committed before the call has an id below this snapshot's xmax;
        caught up means no such event lies beyond the checkpoint. False after `timeout`
        (a replica that holds the projector lock may be slow): the write stands anyway."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        target = await self._pool.fetchval(sql.SNAPSHOT_XMAX)
        while True:
            self._loop.wake.set()
            row = await self._pool.fetchrow(sql.CHECKPOINT)
            behind = await self._pool.fetchval(sql.BEHIND, row["txid"], row["position"], target)
            if behind is None:
                return True
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.005)

    async def step(self) -> tuple[int, bool]:
        """Apply one batch; (events applied, whether committed events are held back)."""
        try:
            return await self._step()
        except asyncpg.UndefinedTableError:
            # Retention dropped a partition the tail still named: only one the checkpoint
            # had passed (the job waits for it), so nothing is lost. Look again at once.
            self._tail.forget()
            return 0, True

    async def _step(self) -> tuple[int, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(sql.TRY_LOCK, PROJECTOR_LOCK):
                return 0, False  # another replica projects
            row = await conn.fetchrow(sql.CHECKPOINT)
            after = Checkpoint(row["txid"], row["position"])
            events, last = await self._tail.read_after(conn, after, self._batch_size)
            if events:
                await apply_batch(conn, events)
                await save_checkpoint(conn, last)
                PROJECTED.inc(len(events))
            return len(events), await self._tail.held_back(conn, last)
