"""Scheduler service: owns time.

Flow: `webhook.*` events (consumer) → `scheduler.webhooks` + cron timers (timers.py);
`delivery.attempt_failed` → retry timers (retries.py); the loop (loop.py) sleeps until the
earliest timer and fires due ones (firing.py, slots.py), appending `delivery.requested`
in the transaction that advances or removes the timer. The scheduler owns time, so it also
runs retention (retention.py): opening delivery buckets and dropping old ones;
and the watchdog (watchdog.py), which fails a delivery left pending past its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from cronhooks_common.consumer import Consumer
from cronhooks_common.events import Event, EventType
from cronhooks_common.service import Runtime
from cronhooks_scheduler.faults import make_fault_ender
from cronhooks_scheduler.loop import SchedulerLoop
from cronhooks_scheduler.retention import RetentionJob
from cronhooks_scheduler.retries import on_attempt_failed
from cronhooks_scheduler.timers import HANDLED, on_webhook_event
from cronhooks_scheduler.triggers import HANDLED as TRIGGER_EVENTS
from cronhooks_scheduler.triggers import on_trigger_event
from cronhooks_scheduler.watchdog import Watchdog


async def handle(conn: asyncpg.Connection, event: Event) -> None:
    if event.type == EventType.DELIVERY_ATTEMPT_FAILED:
        await on_attempt_failed(conn, event)
    elif event.type in TRIGGER_EVENTS:
        await on_trigger_event(conn, event)
    else:
        await on_webhook_event(conn, event)


class Scheduler:
    def __init__(self, runtime: Runtime) -> None:
        self.loop = SchedulerLoop(
            pool=runtime.pool, dsn=runtime.settings.database_url, clock=runtime.clock
        )
        self.consumer = Consumer(
            name="scheduler",
            amqp=runtime.amqp,
            pool=runtime.pool,
            inbox="scheduler.inbox",
            routing_keys=(*HANDLED, EventType.DELIVERY_ATTEMPT_FAILED, *TRIGGER_EVENTS),
            transactional=handle,
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
