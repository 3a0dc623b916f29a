"""The consumer base: a durable queue per service, manual acks, inbox dedupe.

Topology per consumer `name`: durable queue `cronhooks.<name>` bound to the exchange with
the handled routing keys, dead-lettering to `cronhooks.<name>.dead` (a poison message is
parked there, not retried forever); both of the type CRONHOOKS_QUEUE_TYPE names (queues.py).
Prefetch is bounded, per consumer (quorum queues refuse a global QoS).

Two ways to handle messages:

* transactional (default): messages are taken in small batches by one worker, in queue
  order; the handler runs for each event inside one database transaction together with
  the inbox rows of the batch (one statement). An event already in the inbox is skipped,
  so a redelivery after a crash or a broker reconnect has no second effect. The batch
  commits once, then its acks leave together.
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
infrastructure fault can surface as an unexpected error). A message that keeps failing is
poison: the service's `on_poison` hook is asked to end what the event started (CONTRACT
§15: a delivery fails with `internal error: …`, a fire ends `failed`), so nothing stays
pending behind a dead letter; only what the hook cannot end is logged and dead-lettered.

Messages are taken from aiormq's channel as they arrive, without aio-pika's per-message
object and task (on the dispatcher's hot path they cost more than the broker spends on
the message); the consumer re-subscribes whenever the robust channel is reopened. Acks
go through `AckBatcher` (acks.py): those ready in one loop turn leave as one write,
mostly as `multiple` acks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import cast
from uuid import UUID

import aio_pika
import aiormq
import asyncpg
import structlog
from aio_pika.abc import AbstractRobustConnection
from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic
from prometheus_client import Counter

from cronhooks_common import eventstore, logs, queues, work
from cronhooks_common.acks import AckBatcher
from cronhooks_common.broker import (
    DEAD_LETTER_EXCHANGE,
    TRANSIENT_AMQP_ERRORS,
    declare_exchange,
)
from cronhooks_common.buckets import Router, delivery_of
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import Event
from cronhooks_common.trust import as_stored

log = structlog.get_logger(__name__)

TransactionalHandler = Callable[[asyncpg.Connection, Event], Awaitable[None]]
FreeHandler = Callable[[Event], Awaitable[None]]
NoticeHandler = Callable[[work.Ref], Awaitable[None]]
# (event id, stream as the message names them, the error): True when the hook recorded an
# end to what the event started (the message is then acked), False to dead-letter it. The
# hook finds the event in the store itself: the message is only news.
PoisonHandler = Callable[[UUID, str, Exception], Awaitable[bool]]

CONSUMED = Counter(
    "cronhooks_events_consumed_total", "Events taken from the queue", ["consumer", "outcome"]
)
TRANSIENT = (*TRANSIENT_DB_ERRORS, *TRANSIENT_AMQP_ERRORS)
RESUBSCRIBE_CHECK_SECONDS = 1.0  # how often the subscription is checked after a reconnect
POISON_TRIES = 5  # attempts before a message that fails with a non-transient error is parked


async def claim_event(conn: asyncpg.Connection, inbox: str, event: Event) -> bool:
    """Record `event` in the `inbox` table; False if it was handled before.

    Call inside the transaction of the effect: both commit together or neither does.
    Inboxes are partitioned by the delivery bucket of the event's stream (retention).
    """
    return bool(await claim_events(conn, inbox, [event]))


async def claim_events(conn: asyncpg.Connection, inbox: str, events: Sequence[Event]) -> set[UUID]:
    """The batch form of `claim_event`, in one statement: the ids not handled before."""
    rows = await conn.fetch(
        f"insert into {inbox} (event_id, delivery_id)"
        " select * from unnest($1::uuid[], $2::bigint[])"
        " on conflict do nothing returning event_id",
        [e.event_id for e in events],
        [delivery_of(e.stream) for e in events],
    )
    return {r["event_id"] for r in rows}


class Consumer:
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
        self.queue_name = f"cronhooks.{name}"
        self._amqp = amqp
        self._pool = pool
        self._inbox = inbox
        self._router = Router()  # the partition of each stored event read
        self._routing_keys = tuple(str(key) for key in routing_keys)
        self._transactional = transactional
        self._free = free
        self._notice = notice
        self._on_poison = on_poison
        self._prefetch = prefetch
        self._workers = workers if free else 1
        self._batch_size = batch_size if transactional else 1
        self._queue_type = queue_type
        self._inflight: asyncio.Queue[DeliveredMessage] = asyncio.Queue()
        # The events of work notices in hand at once, over all notices: as many as there
        # are workers, the bound a free consumer keeps with one event per message.
        self._notice_slots = asyncio.Semaphore(self._workers)
        self._acks = AckBatcher()
        self._tasks: list[asyncio.Task[None]] = []
        self._channel: aio_pika.abc.AbstractRobustChannel | None = None
        self._subscription: tuple[aiormq.Channel, str] | None = None
        self._stopping = False
        self._subscribing = asyncio.Lock()

    async def start(self) -> None:
        channel = await self._amqp.channel()
        await queues.check_broker(channel, self._queue_type)
        await channel.set_qos(prefetch_count=self._prefetch, global_=False)
        exchange = await declare_exchange(channel)
        dlx = await channel.declare_exchange(
            DEAD_LETTER_EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True
        )
        # The dead-letter queue first: at-least-once dead-lettering needs it bound.
        dead = await queues.declare(
            channel, f"{self.queue_name}.dead", queue_type=self._queue_type
        )
        await dead.bind(dlx, routing_key=self.queue_name)
        queue = await queues.declare(
            channel,
            self.queue_name,
            queue_type=self._queue_type,
            arguments={
                "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
                "x-dead-letter-routing-key": self.queue_name,
            },
        )
        for key in self._routing_keys:
            await queue.bind(exchange, routing_key=key)
        if self._notice is not None:
            await queue.bind(await work.declare_work_exchange(channel), routing_key=self.name)
            for key in work.carried_to(self.name):
                # A queue of an earlier version took these as events: not any more (a
                # binding that is not there is unbound without complaint).
                await queue.unbind(exchange, routing_key=key)
        self._channel = channel
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]
        # aio-pika restores the queue and its bindings when the channel is reopened after
        # a connection loss; the subscription is ours to renew: at once when the channel
        # reports it is reopened, and by a watch in case that subscribe failed (aio-pika
        # swallows a reopen callback's error, and a channel closed while it is restored
        # is not restored again by itself).
        channel.reopen_callbacks.add(self._resubscribe)  # type: ignore[arg-type]
        await self._subscribe(channel)
        self._tasks.append(asyncio.create_task(self._keep_subscribed(channel)))
        log.info("consumer_started", queue=self.queue_name, keys=list(self._routing_keys))

    async def _subscribe(self, channel: aio_pika.abc.AbstractRobustChannel) -> bool:
        """Consume on the channel's current underlay unless already; True if it subscribed."""
        async with self._subscribing:
            underlay = cast(aiormq.Channel, await channel.get_underlay_channel())
            if self._subscription is not None:
                held, tag = self._subscription
                if held is underlay and not held.is_closed and tag in held.consumers:
                    return False
            ok = await underlay.basic_consume(self.queue_name, self._arrived)
            assert ok.consumer_tag is not None
            self._subscription = (underlay, ok.consumer_tag)
            return True

    async def _resubscribe(self, channel: aio_pika.abc.AbstractRobustChannel) -> None:
        if not self._stopping and await self._subscribe(channel):
            log.info("consumer_resubscribed", queue=self.queue_name)

    async def _keep_subscribed(self, channel: aio_pika.abc.AbstractRobustChannel) -> None:
        while not self._stopping:
            await asyncio.sleep(RESUBSCRIBE_CHECK_SECONDS)
            try:
                # asyncio.timeout, not wait_for: a stop's cancel must end it (clock.wait_set)
                async with asyncio.timeout(RESUBSCRIBE_CHECK_SECONDS * 5):
                    await self._resubscribe(channel)
            except TRANSIENT as exc:  # a timeout among them
                log.warning("consumer_resubscribe_failed", queue=self.queue_name, error=repr(exc))

    async def _arrived(self, message: DeliveredMessage) -> None:
        self._acks.delivered(message)
        self._inflight.put_nowait(message)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, finish those in hand (up to `timeout`), give back the rest."""
        self._stopping = True
        if self._subscription is not None:
            underlay, tag = self._subscription
            with contextlib.suppress(*TRANSIENT):
                await underlay.basic_cancel(tag)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
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
        if self._notice is not None and _is_notice(batch[0]):
            await self._run_notice(batch[0])  # free consumers take one message at a time
            return
        parsed: list[tuple[DeliveredMessage, Event]] = []
        for message in batch:
            try:
                parsed.append((message, Event.from_bytes(message.body)))
            except (ValueError, KeyError, TypeError) as exc:
                log.error(
                    "message_malformed",
                    error=repr(exc),
                    message_id=message.header.properties.message_id,
                )
                CONSUMED.labels(self.name, "dead_lettered").inc()
                await self._acks.reject(message)
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
        message: DeliveredMessage,
        event: Event,
        handle: Callable[[Event], Awaitable[None]],
    ) -> None:
        with logs.bound(event_id=event.event_id, correlation_id=event.correlation_id):

            async def one() -> None:
                await handle(event)
                self._acks.ack(message)

            error = await self._with_retries(one)
            if error is None:
                CONSUMED.labels(self.name, "handled").inc()
            else:
                await self._dead_letter(message, event, error)

    async def _run_notice(self, message: DeliveredMessage) -> None:
        """Handle every event a work notice names, at once; ack the notice when all are
        handled. One that keeps failing dead-letters the whole notice once the others are
        done (they are skipped as handled if it is ever replayed)."""
        assert self._notice is not None
        handle = self._notice
        try:
            refs = work.parse(message.body)
        except (ValueError, TypeError) as exc:
            log.error("notice_malformed", error=repr(exc))
            CONSUMED.labels(self.name, "dead_lettered").inc()
            await self._acks.reject(message)
            return

        async def one(ref: work.Ref) -> bool:
            async with self._notice_slots:
                with logs.bound(event_id=ref.event_id):
                    error = await self._with_retries(lambda: handle(ref))
                    if error is not None and await self._ended(ref.event_id, ref.stream, error):
                        return True
            if error is not None:
                log.error(
                    "event_dead_lettered",
                    queue=self.queue_name,
                    event_id=str(ref.event_id),
                    stream=ref.stream,
                    exc_info=error,
                )
            return error is None

        handled = sum(await asyncio.gather(*(one(ref) for ref in refs)))
        CONSUMED.labels(self.name, "handled").inc(handled)
        if handled == len(refs):
            self._acks.ack(message)
        else:
            CONSUMED.labels(self.name, "dead_lettered").inc(len(refs) - handled)
            await self._acks.reject(message)

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

    async def _ended(self, event_id: UUID, stream: str, error: Exception) -> bool:
        """Ask the service to end what a poison event started; True if it did."""
        if self._on_poison is None:
            return False
        try:
            ended = await self._on_poison(event_id, stream, error)
        except Exception as exc:  # the hook's own failure: the dead letter stays the answer
            log.error("poison_hook_failed", queue=self.queue_name, error=repr(exc))
            return False
        if ended:
            log.error(
                "event_ended_by_fault",
                queue=self.queue_name,
                event_id=str(event_id),
                stream=stream,
                exc_info=error,
            )
            CONSUMED.labels(self.name, "ended_by_fault").inc()
        return ended

    async def _dead_letter(self, message: DeliveredMessage, event: Event, error: Exception) -> None:
        if await self._ended(event.event_id, event.stream, error):
            self._acks.ack(message)
            return
        log.error(
            "event_dead_lettered",
            queue=self.queue_name,
            event_type=event.type,
            event_id=str(event.event_id),
            stream=event.stream,
            exc_info=error,
        )
        await self._acks.reject(message)
        CONSUMED.labels(self.name, "dead_lettered").inc()


def _is_notice(message: DeliveredMessage) -> bool:
    delivery = message.delivery
    return isinstance(delivery, Basic.Deliver) and delivery.exchange == work.WORK_EXCHANGE
