"""The end of runs nobody reported (CONTRACT §16.2): a running run whose deadline passed
becomes TIMED_OUT, finished at the deadline, within a few seconds of it — every SWEEP it
looks (runs.sweep). Its state is Postgres's, so a run whose deadline passed while every
service was down times out at the first sweep after the start; replicas take disjoint
runs (SKIP LOCKED) and the delivery stream's version lets one end stand."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import structlog

from cronhooks_common.clock import Clock
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_importer import runs

log = structlog.get_logger(__name__)

SWEEP = 1.0  # seconds between looks: well within the 5 s the contract allows
BATCH = 200  # runs timed out per transaction (more: the next one at once)


class RunSweep:
    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            ended = 0
            try:
                ended = await runs.sweep(self._pool, self._clock.now(), BATCH)
            except TRANSIENT_DB_ERRORS as exc:  # the database is back soon: try again
                log.warning("run_sweep_failed", error=repr(exc))
            except Exception as exc:  # a bug of ours must not stop the sweep for good
                log.exception("run_sweep_failed", error=repr(exc))
            if ended < BATCH:
                await asyncio.sleep(SWEEP)
