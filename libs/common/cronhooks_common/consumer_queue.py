"""A consumer's queue on the broker: declared with its dead-letter queue and bindings, and
consumed on whatever channel aio-pika has reopened.

Topology per consumer `name`: durable queue `cronhooks.<name>` bound to the exchange with
the handled routing keys, dead-lettering to `cronhooks.<name>.dead` (a poison message is
parked there, not retried forever); both of the type CRONHOOKS_QUEUE_TYPE names (queues.py).
Prefetch is bounded, per consumer (quorum queues refuse a global QoS). A consumer of work
notices (work.py) has its queue bound to the work exchange as well.

Messages are taken from aiormq's channel as they arrive, without aio-pika's per-message
object and task (on the dispatcher's hot path they cost more than the broker spends on
the message). aio-pika restores the queue and its bindings when the channel is reopened
after a connection loss; the subscription is ours to renew: at once when the channel
reports it is reopened, and by a watch in case that subscribe failed (aio-pika swallows a
reopen callback's error, and a channel closed while it is restored is not restored again
by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import cast

import aio_pika
import aiormq
import structlog
from aio_pika.abc import AbstractRobustChannel
from aiormq.abc import ConsumerCallback

from cronhooks_common import queues, work
from cronhooks_common.broker import DEAD_LETTER_EXCHANGE, declare_exchange
from cronhooks_common.poison import TRANSIENT

log = structlog.get_logger(__name__)

RESUBSCRIBE_CHECK_SECONDS = 1.0  # how often the subscription is checked after a reconnect


def queue_name(consumer: str) -> str:
    """The queue of the consumer named `consumer` (its dead letters: the same + `.dead`)."""
    return f"cronhooks.{consumer}"


async def declare(
    channel: AbstractRobustChannel,
    *,
    consumer: str,
    queue_type: str,
    prefetch: int,
    routing_keys: Iterable[str],
    notices: bool,
) -> None:
    """Declare `consumer`'s queue, its dead-letter queue and their bindings on `channel`
    (and its prefetch); `notices`: bind it to the work exchange too."""
    name = queue_name(consumer)
    await queues.check_broker(channel, queue_type)
    await channel.set_qos(prefetch_count=prefetch, global_=False)
    exchange = await declare_exchange(channel)
    dlx = await channel.declare_exchange(
        DEAD_LETTER_EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True
    )
    # The dead-letter queue first: at-least-once dead-lettering needs it bound.
    dead = await queues.declare(channel, f"{name}.dead", queue_type=queue_type)
    await dead.bind(dlx, routing_key=name)
    queue = await queues.declare(
        channel,
        name,
        queue_type=queue_type,
        arguments={
            "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
            "x-dead-letter-routing-key": name,
        },
    )
    for key in routing_keys:
        await queue.bind(exchange, routing_key=key)
    if notices:
        await queue.bind(await work.declare_work_exchange(channel), routing_key=consumer)
        for key in work.carried_to(consumer):
            # A queue of an earlier version took these as events: not any more (a
            # binding that is not there is unbound without complaint).
            await queue.unbind(exchange, routing_key=key)


class Subscription:
    """Consuming one queue on the current underlay of a robust channel, renewed whenever
    that underlay changes, until `cancel`."""

    def __init__(self, queue: str, arrived: ConsumerCallback) -> None:
        self.queue = queue
        self._arrived = arrived
        # The underlay consumed on and the consumer tag there; None before the first.
        self.held: tuple[aiormq.Channel, str] | None = None
        self._stopping = False
        self._subscribing = asyncio.Lock()

    async def subscribe(self, channel: AbstractRobustChannel) -> bool:
        """Consume on the channel's current underlay unless already; True if it subscribed."""
        async with self._subscribing:
            underlay = cast(aiormq.Channel, await channel.get_underlay_channel())
            if self.held is not None:
                held, tag = self.held
                if held is underlay and not held.is_closed and tag in held.consumers:
                    return False
            ok = await underlay.basic_consume(self.queue, self._arrived)
            assert ok.consumer_tag is not None
            self.held = (underlay, ok.consumer_tag)
            return True

    async def renew(self, channel: AbstractRobustChannel) -> None:
        """Subscribe again if the subscription is gone (the channel's reopen callback)."""
        if not self._stopping and await self.subscribe(channel):
            log.info("consumer_resubscribed", queue=self.queue)

    async def watch(self, channel: AbstractRobustChannel) -> None:
        """Renew the subscription every RESUBSCRIBE_CHECK_SECONDS if it is gone."""
        while not self._stopping:
            await asyncio.sleep(RESUBSCRIBE_CHECK_SECONDS)
            try:
                # asyncio.timeout, not wait_for: a stop's cancel must end it (clock.wait_set)
                async with asyncio.timeout(RESUBSCRIBE_CHECK_SECONDS * 5):
                    await self.renew(channel)
            except TRANSIENT as exc:  # a timeout among them
                log.warning("consumer_resubscribe_failed", queue=self.queue, error=repr(exc))

    async def cancel(self) -> None:
        """Take no more messages: cancel the subscription, renew it no more."""
        self._stopping = True
        if self.held is not None:
            underlay, tag = self.held
            with contextlib.suppress(*TRANSIENT):
                await underlay.basic_cancel(tag)
