"""The consumer base: a durable queue per service, manual acks, inbox dedupe.

Each consumer has its own queue, dead-lettering what it cannot handle (consumer_queue.py).
Two ways to handle messages:

* transactional (default): messages are taken in small batches by one worker, in queue
  order; the handler runs for each event inside one database transaction together with
  the inbox rows of the batch (one statement, inbox.py). An event already in the inbox is
  skipped, so a redelivery after a crash or a broker reconnect has no second effect. The
  batch commits once, then its acks leave together.
* free: `workers` tasks each take one message and call the handler without a
  transaction; the handler is responsible for idempotency (with `claim_event`) and for
  acting on the stored event (`trust.as_stored`, batched with its own lookups). The
  dispatcher uses this to keep HTTP calls outside transactions.

The event store decides (trust.py): a transactional batch is checked against the stored
events in the batch's transaction, and only messages that match their stored event are
claimed and handled — with the stored event, not the message. Others are dropped and
counted; they never reach a handler.

A failure is retried, and a message that keeps failing is poison: the service's
`on_poison` hook ends what the event started, or the message is dead-lettered (poison.py).
A batch that fails is retried one message at a time, to find the poison one.

Acks go through `AckBatcher` (acks.py): those ready in one loop turn leave as one write,
mostly as `multiple` acks.

This module is also where the services import the consumer's names from: the inbox
(`claim_event`, `claim_events`), the poison hook (`PoisonHandler`, `TRANSIENT`) and
`waited_aside` (a long wait that gives its slot to other events: consumer_notices.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable

import aio_pika
import aiormq
import asyncpg
import structlog
from aio_pika.abc import AbstractRobustConnection
from aiormq.abc import DeliveredMessage

from cronhooks_common import consumer_queue, eventstore, logs, queues, work
from cronhooks_common.acks import AckBatcher
from cronhooks_common.buckets import Router
from cronhooks_common.consumer_notices import NoticeHandler, Notices, is_notice, waited_aside
from cronhooks_common.consumer_queue import RESUBSCRIBE_CHECK_SECONDS, Subscription
from cronhooks_common.events import Event
from cronhooks_common.inbox import claim_event, claim_events
from cronhooks_common.poison import (
    CONSUMED,
    POISON_TRIES,
    TRANSIENT,
    Poison,
    PoisonHandler,
    with_retries,
)
from cronhooks_common.trust import as_stored

__all__ = [
    "CONSUMED",
    "POISON_TRIES",
    "RESUBSCRIBE_CHECK_SECONDS",
    "TRANSIENT",
    "Consumer",
    "FreeHandler",
    "NoticeHandler",
    "PoisonHandler",
    "TransactionalHandler",
    "claim_event",
    "claim_events",
    "waited_aside",
]

log = structlog.get_logger(__name__)

TransactionalHandler = Callable[[asyncpg.Connection, Event], Awaitable[None]]
FreeHandler = Callable[[Event], Awaitable[None]]


class Consumer:
    """One service's consumer: give exactly one of `transactional=` or `free=` (see the
    module doc); `notice=` handles the work notices work.ROUTES sends to `name`, and
    `on_poison=` ends what a poison event started."""

    def __init__(
        self,
        *,
        name: str,
        amqp: AbstractRobustConnection,
        pool: asyncpg.Pool | None,  # free handlers bring their own
        inbox: str,
        routing_keys: Iterable[str],
        transactional: TransactionalHandler | None = None,
        free: FreeHandler | None = None,
        notice: NoticeHandler | None = None,
        on_poison: PoisonHandler | None = None,
        prefetch: int = 200,
        workers: int = 1,
        batch_size: int = 100,
        queue_type: str = queues.CLASSIC,
    ) -> None:
        if (transactional is None) == (free is None):
            raise ValueError("give exactly one of transactional= or free=")
        if transactional is not None and pool is None:
            raise ValueError("a transactional consumer needs the pool")
        if notice is not None and free is None:
            raise ValueError("work notices are for free consumers")
        if (notice is not None) != bool(work.carried_to(name)):
            raise ValueError(f"give notice= exactly when work.ROUTES sends notices to {name!r}")
        if carried := work.carried_to(name).intersection(map(str, routing_keys)):
            raise ValueError(f"{sorted(carried)} reach {name!r} as work notices, not as events")
        self.name = name
        self.queue_name = consumer_queue.queue_name(name)
        self._amqp = amqp
        self._pool = pool
        self._inbox = inbox
        self._router = Router()  # the partition of each stored event read
        self._routing_keys = tuple(str(key) for key in routing_keys)
        self._transactional = transactional
        self._free = free
        self._prefetch = prefetch
        self._workers = workers if free else 1
        self._batch_size = batch_size if transactional else 1
        self._queue_type = queue_type
        self._inflight: asyncio.Queue[DeliveredMessage] = asyncio.Queue()
        self._acks = AckBatcher()
        self._poison = Poison(
            consumer=name, queue=self.queue_name, acks=self._acks, on_poison=on_poison
        )
        self._notices: Notices | None = None  # a free consumer's, when it takes notices
        if notice is not None:
            self._notices = Notices(
                consumer=name,
                queue=self.queue_name,
                handle=notice,
                workers=self._workers,
                acks=self._acks,
                poison=self._poison,
            )
        self._consuming = Subscription(self.queue_name, self._arrived)
        self._tasks: list[asyncio.Task[None]] = []
        self._channel: aio_pika.abc.AbstractRobustChannel | None = None

    @property
    def _subscription(self) -> tuple[aiormq.Channel, str] | None:
        """The channel consumed on and the consumer tag there (None before `start`)."""
        return self._consuming.held

    async def start(self) -> None:
        """Declare the queue, start the workers, and take messages."""
        channel = await self._amqp.channel()
        await consumer_queue.declare(
            channel,
            consumer=self.name,
            queue_type=self._queue_type,
            prefetch=self._prefetch,
            routing_keys=self._routing_keys,
            notices=self._notices is not None,
        )
        self._channel = channel
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]
        # The subscription is renewed at once when the channel reports it is reopened,
        # and by a watch in case that failed (consumer_queue.py).
        channel.reopen_callbacks.add(self._consuming.renew)  # type: ignore[arg-type]
        await self._consuming.subscribe(channel)
        self._tasks.append(asyncio.create_task(self._consuming.watch(channel)))
        log.info("consumer_started", queue=self.queue_name, keys=list(self._routing_keys))

    async def _arrived(self, message: DeliveredMessage) -> None:
        self._acks.delivered(message)
        self._inflight.put_nowait(message)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, finish those in hand (up to `timeout`), give back the rest."""
        await self._consuming.cancel()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # not wait_for (clock.wait_set)
                await self._inflight.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._acks.drain()
        # Unacked messages return to the queue when the channel closes.

    async def _work(self) -> None:
        while True:
            first = await self._inflight.get()
            batch = [first]
            while len(batch) < self._batch_size and not self._inflight.empty():
                batch.append(self._inflight.get_nowait())
            try:
                await self._handle_batch(batch)
            finally:
                for _ in batch:
                    self._inflight.task_done()

    async def _handle_batch(self, batch: list[DeliveredMessage]) -> None:
        if self._notices is not None and is_notice(batch[0]):
            await self._notices.run(batch[0])  # free consumers take one message at a time
            return
        parsed: list[tuple[DeliveredMessage, Event]] = []
        for message in batch:
            try:
                parsed.append((message, Event.from_bytes(message.body)))
            except (ValueError, KeyError, TypeError) as exc:
                await self._poison.malformed(
                    message,
                    "message_malformed",
                    error=repr(exc),
                    message_id=message.header.properties.message_id,
                )
        if not parsed:
            return
        if self._free is not None:
            for message, event in parsed:
                await self._run(message, event, self._free)
            return

        async def transact_and_ack() -> None:
            await self._transact(parsed)
            for message, _ in parsed:
                self._acks.ack(message)

        error = await with_retries(transact_and_ack)
        if error is None:
            CONSUMED.labels(self.name, "handled").inc(len(parsed))
        elif len(parsed) == 1:
            await self._poison.dead_letter(*parsed[0], error)
        else:  # find the poison message: retry one by one
            for message, event in parsed:
                await self._run(message, event, self._transact_one(message))

    async def _run(
        self,
        message: DeliveredMessage,
        event: Event,
        handle: Callable[[Event], Awaitable[None]],
    ) -> None:
        with logs.bound(event_id=event.event_id, correlation_id=event.correlation_id):

            async def one() -> None:
                await handle(event)
                self._acks.ack(message)

            error = await with_retries(one)
            if error is None:
                CONSUMED.labels(self.name, "handled").inc()
            else:
                await self._poison.dead_letter(message, event, error)

    def _transact_one(self, message: DeliveredMessage) -> Callable[[Event], Awaitable[None]]:
        return lambda event: self._transact([(message, event)])

    async def _transact(self, parsed: list[tuple[DeliveredMessage, Event]]) -> None:
        assert self._transactional is not None and self._pool is not None
        async with self._pool.acquire() as conn, conn.transaction():
            stored = await eventstore.read_events(
                conn, [(event.event_id, event.stream) for _, event in parsed], self._router
            )
            genuine = [
                event
                for _, sent in parsed
                if (event := as_stored(sent, stored.get(sent.event_id), consumer=self.name))
            ]
            fresh = await claim_events(conn, self._inbox, genuine)
            for event in genuine:
                if event.event_id in fresh:
                    fresh.discard(event.event_id)  # a copy of it later in the batch is a repeat
                    with logs.bound(event_id=event.event_id, correlation_id=event.correlation_id):
                        await self._transactional(conn, event)
