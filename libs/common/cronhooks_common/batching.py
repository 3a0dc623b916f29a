"""Group commit: many small units of work share one transaction (and one WAL flush).

Callers `await committer.run(work)`; the committer gathers the works queued meanwhile (up
to `max_batch`), runs each in its own savepoint inside one transaction, commits, and only
then returns each caller its result (or raises its error). A work that fails rolls back
only its savepoint; a failed commit fails every work of the batch, and their callers
retry as they would after any transient error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")
Work = Callable[[asyncpg.Connection], Awaitable[Any]]


class GroupCommitter:
    def __init__(self, pool: asyncpg.Pool, *, max_batch: int = 200) -> None:
        self._pool = pool
        self._max_batch = max_batch
        self._queue: asyncio.Queue[tuple[Work, asyncio.Future[Any]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def run(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        await self._queue.put((work, future))
        return await future

    async def _loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[Work, asyncio.Future[Any]]]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                for work, _ in batch:
                    try:
                        async with conn.transaction():  # a savepoint per work
                            outcomes.append((True, await work(conn)))
                    except Exception as exc:
                        outcomes.append((False, exc))
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
