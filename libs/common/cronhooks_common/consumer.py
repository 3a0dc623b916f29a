"""The consumer base: a durable queue per service, manual acks, inbox dedupe.

Topology per consumer `name`: durable queue `cronhooks.<name>` bound to the exchange with
the handled routing keys, dead-lettering to `cronhooks.<name>.dead` (a poison message is
parked there, not retried forever). Prefetch is bounded.

Two ways to handle messages:

* transactional (default): messages are taken in small batches by one worker, in queue
  order; the handler runs for each event inside one database transaction together with
  the inbox rows of the batch (one statement). An event already in the inbox is skipped,
  so a redelivery after a crash or a broker reconnect has no second effect. The batch
  commits once, then one `multiple` ack settles all its messages.
* free: `workers` tasks each take one message and call the handler without a
  transaction; the handler is responsible for idempotency (with `claim_event`) and for
  acting on the stored event (`trust.as_stored`, batched with its own lookups). The
  dispatcher uses this to keep HTTP calls outside transactions.

The event store decides (trust.py): a transactional batch is checked against the stored
events in the batch's transaction, and only messages that match their stored event are
claimed and handled — with the stored event, not the message. Others are dropped and
counted; they never reach a handler.

Transient failures (database or broker gone) leave the message unacked and retry with
backoff for as long as it takes. Any other exception is retried a few times too (an
infrastructure fault can surface as an unexpected error); only a message that keeps
failing is logged and dead-lettered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from uuid import UUID

import aio_pika
import asyncpg
import structlog
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.broker import (
    DEAD_LETTER_EXCHANGE,
    TRANSIENT_AMQP_ERRORS,
    declare_exchange,
)
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import Event
from cronhooks_common.trust import as_stored

log = structlog.get_logger(__name__)

TransactionalHandler = Callable[[asyncpg.Connection, Event], Awaitable[None]]
FreeHandler = Callable[[Event], Awaitable[None]]

CONSUMED = Counter(
    "cronhooks_events_consumed_total", "Events taken from the queue", ["consumer", "outcome"]
)
TRANSIENT = (*TRANSIENT_DB_ERRORS, *TRANSIENT_AMQP_ERRORS)
POISON_TRIES = 5  # attempts before a message that fails with a non-transient error is parked


async def claim_event(conn: asyncpg.Connection, inbox: str, event_id: UUID) -> bool:
    """Record `event_id` in the `inbox` table; False if it was handled before.

    Call inside the transaction of the effect: both commit together or neither does.
    """
    row = await conn.fetchval(
        f"insert into {inbox} (event_id) values ($1) on conflict do nothing returning true",
        event_id,
    )
    return bool(row)


async def claim_events(conn: asyncpg.Connection, inbox: str, event_ids: list[UUID]) -> set[UUID]:
    """The batch form of `claim_event`, in one statement: the ids not handled before."""
    rows = await conn.fetch(
        f"insert into {inbox} (event_id) select unnest($1::uuid[])"
        " on conflict do nothing returning event_id",
        event_ids,
    )
    return {r["event_id"] for r in rows}


async def already_handled(conn: asyncpg.Connection, inbox: str, event_id: UUID) -> bool:
    return bool(await conn.fetchval(f"select true from {inbox} where event_id = $1", event_id))


class Consumer:
    def __init__(
        self,
        *,
        name: str,
        amqp: AbstractRobustConnection,
        pool: asyncpg.Pool,
        inbox: str,
        routing_keys: Iterable[str],
        transactional: TransactionalHandler | None = None,
        free: FreeHandler | None = None,
        prefetch: int = 200,
        workers: int = 1,
        batch_size: int = 100,
    ) -> None:
        if (transactional is None) == (free is None):
            raise ValueError("give exactly one of transactional= or free=")
        self.name = name
        self.queue_name = f"cronhooks.{name}"
        self._amqp = amqp
        self._pool = pool
        self._inbox = inbox
        self._routing_keys = tuple(str(key) for key in routing_keys)
        self._transactional = transactional
        self._free = free
        self._prefetch = prefetch
        self._workers = workers if free else 1
        self._batch_size = batch_size if transactional else 1
        self._inflight: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._queue: aio_pika.abc.AbstractQueue | None = None
        self._consumer_tag: str | None = None

    async def start(self) -> None:
        channel = await self._amqp.channel()
        await channel.set_qos(prefetch_count=self._prefetch)
        exchange = await declare_exchange(channel)
        dlx = await channel.declare_exchange(
            DEAD_LETTER_EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True
        )
        dead = await channel.declare_queue(f"{self.queue_name}.dead", durable=True)
        await dead.bind(dlx, routing_key=self.queue_name)
        queue = await channel.declare_queue(
            self.queue_name,
            durable=True,
            arguments={
                "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
                "x-dead-letter-routing-key": self.queue_name,
            },
        )
        for key in self._routing_keys:
            await queue.bind(exchange, routing_key=key)
        self._queue = queue
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]
        self._consumer_tag = await queue.consume(self._inflight.put)
        log.info("consumer_started", queue=self.queue_name, keys=list(self._routing_keys))

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, finish those in hand (up to `timeout`), give back the rest."""
        if self._queue is not None and self._consumer_tag is not None:
            with contextlib.suppress(*TRANSIENT):
                await self._queue.cancel(self._consumer_tag)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._inflight.join(), timeout)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
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

    async def _handle_batch(self, batch: list[AbstractIncomingMessage]) -> None:
        parsed: list[tuple[AbstractIncomingMessage, Event]] = []
        for message in batch:
            try:
                parsed.append((message, Event.from_bytes(message.body)))
            except (ValueError, KeyError, TypeError) as exc:
                log.error("message_malformed", error=repr(exc), message_id=message.message_id)
                CONSUMED.labels(self.name, "dead_lettered").inc()
                await self._settle(message.reject(requeue=False))
        if not parsed:
            return
        if self._free is not None:
            for message, event in parsed:
                await self._run(message, event, self._free)
            return

        async def transact_and_ack() -> None:
            await self._transact(parsed)
            await self._ack_batch([message for message, _ in parsed])

        error = await self._with_retries(transact_and_ack)
        if error is None:
            CONSUMED.labels(self.name, "handled").inc(len(parsed))
        elif len(parsed) == 1:
            await self._dead_letter(*parsed[0], error)
        else:  # find the poison message: retry one by one
            for message, event in parsed:
                await self._run(message, event, self._transact_one(message))

    async def _run(
        self,
        message: AbstractIncomingMessage,
        event: Event,
        handle: Callable[[Event], Awaitable[None]],
    ) -> None:
        with structlog.contextvars.bound_contextvars(
            event_id=str(event.event_id), correlation_id=str(event.correlation_id)
        ):

            async def one() -> None:
                await handle(event)
                await self._settle(message.ack())

            error = await self._with_retries(one)
            if error is None:
                CONSUMED.labels(self.name, "handled").inc()
            else:
                await self._dead_letter(message, event, error)

    @staticmethod
    async def _with_retries(work: Callable[[], Awaitable[None]]) -> Exception | None:
        """Run `work` until it succeeds (None). Transient errors (database or broker gone)
        retry with backoff for as long as it takes; any other error a few times, then it
        is returned: the message is poison."""
        delay, failures = 0.2, 0
        while True:
            try:
                await work()
                return None
            except TRANSIENT as exc:
                log.warning("consumer_transient_error", error=repr(exc), retry_in=delay)
            except Exception as exc:
                failures += 1
                if failures >= POISON_TRIES:
                    return exc
                log.warning("consumer_error_retrying", error=repr(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _transact_one(self, message: AbstractIncomingMessage) -> Callable[[Event], Awaitable[None]]:
        return lambda event: self._transact([(message, event)])

    async def _transact(self, parsed: list[tuple[AbstractIncomingMessage, Event]]) -> None:
        assert self._transactional is not None
        async with self._pool.acquire() as conn, conn.transaction():
            stored = await eventstore.read_events(conn, [event.event_id for _, event in parsed])
            genuine = [
                event
                for _, sent in parsed
                if (event := as_stored(sent, stored.get(sent.event_id), consumer=self.name))
            ]
            fresh = await claim_events(conn, self._inbox, [event.event_id for event in genuine])
            for event in genuine:
                if event.event_id in fresh:
                    fresh.discard(event.event_id)  # a copy of it later in the batch is a repeat
                    with structlog.contextvars.bound_contextvars(
                        event_id=str(event.event_id), correlation_id=str(event.correlation_id)
                    ):
                        await self._transactional(conn, event)

    async def _ack_batch(self, messages: list[AbstractIncomingMessage]) -> None:
        """One `multiple` ack per channel, on the batch's last delivery tag. It covers the
        whole batch and nothing else: the one transactional worker takes messages in
        delivery order, and every earlier message is settled already. (After a reconnect
        a batch can hold messages of the old channel; their ack fails quietly and the
        broker redelivers them, which the inbox absorbs.)"""
        last: dict[int, AbstractIncomingMessage] = {}
        for message in messages:
            try:
                channel = id(message.channel)
            except TRANSIENT_AMQP_ERRORS:
                continue  # its channel is closed: the broker hands the message out again
            held = last.get(channel)
            if held is None or (message.delivery_tag or 0) > (held.delivery_tag or 0):
                last[channel] = message
        for message in last.values():
            await self._settle(message.ack(multiple=True))

    async def _dead_letter(
        self, message: AbstractIncomingMessage, event: Event, error: Exception
    ) -> None:
        log.error(
            "event_dead_lettered",
            queue=self.queue_name,
            event_type=event.type,
            event_id=str(event.event_id),
            stream=event.stream,
            exc_info=error,
        )
        await self._settle(message.reject(requeue=False))
        CONSUMED.labels(self.name, "dead_lettered").inc()

    @staticmethod
    async def _settle(settling: Awaitable[None]) -> None:
        # If the channel died, the broker redelivers the message; the inbox absorbs it.
        with contextlib.suppress(*TRANSIENT_AMQP_ERRORS):
            await settling
