"""The scheduler's loop: sleep until the earliest timer or until something changes.

There is no ticker. The loop fires what is due, asks the index for the next due time,
and sleeps until then; a NOTIFY on `cronhooks_timers` (any replica's change to a timer)
wakes it early. The notification connection reconnects by itself; after a reconnect the
loop looks again at once, since notifications sent meanwhile are lost.

A herd is claimed in batches that ramp up: the first transaction takes FIRST_BATCH timers,
each full batch doubles the next, up to `batch_size`. One 1,000-timer transaction holds
its slots for ~0.1 s before the dispatcher sees any of them; a small first batch starts
the first deliveries sooner, and the big batches that follow keep the per-slot cost low.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import asyncpg
import structlog

from cronhooks_common import db
from cronhooks_common.buckets import Router
from cronhooks_common.clock import Clock
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_scheduler import paused, queries
from cronhooks_scheduler.firing import fire_due
from cronhooks_scheduler.timers import TIMERS_CHANNEL

log = structlog.get_logger(__name__)

# Upper bound on one sleep: a safety net for a lost notification, not a schedule.
MAX_SLEEP = timedelta(seconds=30)
# When the earliest timer is due but locked by another replica, look again soon.
BUSY_RETRY = timedelta(milliseconds=50)
# The first claim of a herd: small enough that its deliveries start within tens of ms.
FIRST_BATCH = 125


class SchedulerLoop:
    def __init__(
        self, *, pool: asyncpg.Pool, dsn: str, clock: Clock, batch_size: int = 1000
    ) -> None:
        self._pool = pool
        self._router = Router()  # the partitions of retried deliveries' streams
        self._dsn = dsn
        self._clock = clock
        self._batch_size = batch_size
        self._first_batch = min(FIRST_BATCH, batch_size)
        self._next_batch = self._first_batch
        self._wake = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        self._listener = asyncio.create_task(
            db.wake_on_notify(self._dsn, TIMERS_CHANNEL, self._wake, name="scheduler-listen")
        )
        try:
            while True:
                try:
                    await self._step()
                except TRANSIENT_DB_ERRORS as exc:
                    log.warning("scheduler_database_error", error=repr(exc))
                    await asyncio.sleep(0.5)
        finally:
            self._listener.cancel()

    async def _step(self) -> None:
        self._wake.clear()
        switch = await paused.end_if_expired(self._pool, self._clock)
        now = self._clock.now()
        asked = self._next_batch
        claimed = await fire_due(self._pool, now=now, batch_size=asked, router=self._router)
        # A full batch means more is due: ask for twice as many next time. Anything less,
        # and the herd is over; the next one starts small again.
        self._next_batch = (
            min(asked * 2, self._batch_size) if claimed == asked else self._first_batch
        )
        if claimed:
            return  # a timer may be due again, or more than a batch was due: go on
        # While paused retries and agent-cron fires wait for the resume, whose NOTIFY
        # (or `until`, when the pause ends by itself) wakes the loop.
        held = switch.active(now)
        next_due: datetime | None = await self._pool.fetchval(
            queries.EARLIEST_TIMER_WHILE_PAUSED if held else queries.EARLIEST_TIMER
        )
        if held and switch.until is not None:
            next_due = switch.until if next_due is None else min(next_due, switch.until)
        now = self._clock.now()
        if next_due is not None and next_due <= now:
            # Due, but locked by another replica: a wall-clock wait, whatever the clock.
            await asyncio.sleep(BUSY_RETRY.total_seconds())
            return
        deadline = min(next_due or now + MAX_SLEEP, now + MAX_SLEEP)
        await self._clock.sleep_until(deadline, self._wake)
