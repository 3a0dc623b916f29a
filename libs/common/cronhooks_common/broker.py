"""RabbitMQ topology and messages (CONTRACT §6).

Durable topic exchange `cronhooks.events`; persistent JSON messages whose `message_id` is
the event id and whose `type` is the routing key. Each consumer gets a durable queue
`cronhooks.<name>` that dead-letters rejected messages to `cronhooks.<name>.dead`, both of
the type CRONHOOKS_QUEUE_TYPE names (queues.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractRobustConnection
from pamqp.commands import Basic

from cronhooks_common import amqp_writes
from cronhooks_common.events import Event

log = structlog.get_logger(__name__)

# Frames ready together leave in one socket write (amqp_writes.py).
amqp_writes.install()

EXCHANGE = "cronhooks.events"
DEAD_LETTER_EXCHANGE = "cronhooks.dead-letter"

TRANSIENT_AMQP_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ConnectionError,
    TimeoutError,
    aio_pika.exceptions.AMQPConnectionError,
    aio_pika.exceptions.ChannelInvalidStateError,
    aio_pika.exceptions.ChannelClosed,
    aio_pika.exceptions.DeliveryError,
)


async def connect(url: str, *, name: str, wait: bool = True) -> AbstractRobustConnection:
    """A self-healing connection; with `wait`, retries until the broker answers."""
    delay = 0.2
    while True:
        try:
            return await aio_pika.connect_robust(
                url, client_properties={"connection_name": f"cronhooks-{name}"}
            )
        except TRANSIENT_AMQP_ERRORS as exc:
            if not wait:
                raise
            log.warning("broker_unavailable", error=str(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def declare_exchange(channel: AbstractChannel) -> AbstractExchange:
    return await channel.declare_exchange(EXCHANGE, aio_pika.ExchangeType.TOPIC, durable=True)


def properties(event: Event) -> Basic.Properties:
    """The AMQP properties of an event's message (built for aiormq directly: the relay
    publishes without aio-pika's Message object, it is much cheaper)."""
    return Basic.Properties(
        content_type="application/json",
        delivery_mode=2,
        message_id=str(event.event_id),
        message_type=event.type,
        correlation_id=str(event.correlation_id),
        timestamp=event.occurred_at,
        headers={"stream": event.stream, "version": event.version},
    )


async def publish_round(channel: AbstractChannel, events: Sequence[Event]) -> None:
    """Publish `events` (at most one per stream) on a confirm-mode channel; return once the
    broker has taken every one."""
    messages = [(e.type, e.to_bytes(), properties(e)) for e in events]
    await publish_messages(channel, EXCHANGE, messages)


async def publish_messages(
    channel: AbstractChannel, exchange: str, messages: list[tuple[str, bytes, Basic.Properties]]
) -> None:
    """Publish `(routing key, body, properties)` to `exchange` on a confirm-mode channel;
    return once the broker has taken every one. Queued in one go where aiormq is the version
    `amqp_writes` knows, else one `basic_publish` each."""
    underlay = await channel.get_underlay_channel()
    confirmations: Sequence[Awaitable[Any]]
    if amqp_writes.INSTALLED:
        confirmations = await amqp_writes.queue_confirmed_round(underlay, exchange, messages)
    else:
        # wait=False: do not hold the channel lock until the frame is written and drained —
        # the publishes queue up at once and leave together; the confirm is what counts.
        confirmations = [
            underlay.basic_publish(
                body,
                exchange=exchange,
                routing_key=key,
                properties=props,
                mandatory=False,
                wait=False,  # type: ignore[call-arg]  # aiormq.Channel has it, its ABC not
            )
            for key, body, props in messages
        ]
    for confirmation in await asyncio.gather(*confirmations):
        if not isinstance(confirmation, Basic.Ack):
            raise aio_pika.exceptions.DeliveryError(None, confirmation)


async def publish_confirmed(channel: AbstractChannel, event: Event) -> None:
    """Publish on a confirm-mode channel; return once the broker has taken the message."""
    underlay = await channel.get_underlay_channel()
    # wait=False: do not hold the channel lock until the frame is written and drained —
    # a round's publishes queue up at once and leave together; the confirm is what counts.
    confirmation = await underlay.basic_publish(
        event.to_bytes(),
        exchange=EXCHANGE,
        routing_key=event.type,
        properties=properties(event),
        mandatory=False,
        wait=False,  # type: ignore[call-arg]  # aiormq.Channel has it, its ABC does not
    )
    if not isinstance(confirmation, Basic.Ack):
        raise aio_pika.exceptions.DeliveryError(None, confirmation)  # type: ignore[arg-type]
