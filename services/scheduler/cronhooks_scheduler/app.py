"""Scheduler service: owns time.

Flow: the consumer hands each event it hears to its handler (handlers.py): `webhook.*`
→ `scheduler.webhooks` + cron timers (timers.py); `delivery.attempt_failed` → retry
timers (retries.py); `trigger.*` → trigger and fire-retry timers (triggers.py). The loop
(loop.py) sleeps until the earliest timer and fires due ones (firing.py, by the timers'
kind: timer_kinds.py), appending `delivery.requested` in the transaction that advances or
removes the timer. The scheduler owns time, so it also runs retention (retention.py):
opening delivery buckets and dropping old ones; and the watchdog (watchdog.py), which
fails a delivery left pending past its deadline. Its SQL is in queries.py.
"""

from __future__ import annotations

import asyncio
import contextlib

from cronhooks_common.consumer import Consumer
from cronhooks_common.service import Runtime
from cronhooks_scheduler.faults import INBOX, make_fault_ender
from cronhooks_scheduler.handlers import HANDLERS
from cronhooks_scheduler.loop import SchedulerLoop
from cronhooks_scheduler.retention import RetentionJob
from cronhooks_scheduler.watchdog import Watchdog


class Scheduler:
    def __init__(self, runtime: Runtime) -> None:
        self.loop = SchedulerLoop(
            pool=runtime.pool, dsn=runtime.settings.database_url, clock=runtime.clock
        )
        self.consumer = Consumer(
            name="scheduler",
            amqp=runtime.amqp,
            pool=runtime.pool,
            inbox=INBOX,
            routing_keys=HANDLERS.routing_keys,
            transactional=HANDLERS.handle,
            on_poison=make_fault_ender(runtime.pool, runtime.clock),
            queue_type=runtime.settings.queue_type,
        )
        self.retention = RetentionJob(
            pool=runtime.pool,
            clock=runtime.clock,
            delivery_retention_days=runtime.settings.delivery_retention_days,
            attempt_log_retention_days=runtime.settings.attempt_log_retention_days,
        )
        self.watchdog = Watchdog(runtime.pool, runtime.clock)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self.consumer.start()
        self._tasks = [
            asyncio.create_task(self.loop.run()),
            asyncio.create_task(self.retention.run()),
            asyncio.create_task(self.watchdog.run()),
        ]

    async def stop(self) -> None:
        await self.consumer.stop()
        for task in self._tasks:
            # A batch in flight is one transaction: cancelling rolls it back, nothing lost.
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def bootstrap(runtime: Runtime) -> Scheduler:
    return Scheduler(runtime)
