"""A publish round queued in one go (broker.publish_round over amqp_writes) reaches the
broker exactly as one `basic_publish` per event would: every message, in order, with its
body and properties, confirmed; bodies larger than a frame are split; a round on a closed
channel fails as a transient error before anything is taken."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import uuid4

import aio_pika
import pytest

from cronhooks_common import amqp_writes, broker
from cronhooks_common.events import Event


def _event(n: int, size: int = 40) -> Event:
    return Event(
        uuid4(),
        "test.round",
        f"round-{n}",
        1,
        datetime.now(UTC),
        {"n": n, "pad": "x" * size},
        uuid4(),
    )


async def _drain(
    queue: aio_pika.abc.AbstractQueue, n: int
) -> list[aio_pika.abc.AbstractIncomingMessage]:
    got: list[aio_pika.abc.AbstractIncomingMessage] = []
    while len(got) < n:
        message = await queue.get(timeout=5, fail=False)
        if message is None:
            break
        await message.ack()
        got.append(message)
    return got


async def test_a_round_arrives_whole_in_order_with_its_properties(
    amqp: broker.AbstractRobustConnection,
) -> None:
    assert amqp_writes.INSTALLED  # this aiormq is the one the round writer knows
    channel = await amqp.channel(publisher_confirms=True)
    await broker.declare_exchange(channel)
    queue = await channel.declare_queue("test.rounds", durable=True)
    await queue.bind(broker.EXCHANGE, routing_key="test.round")
    # 1,500 events, more than the connection's write queue holds at once, and two bodies
    # larger than a frame (128 KiB), split into several body frames.
    events = [_event(i) for i in range(1500)] + [_event(1500, 300_000), _event(1501, 1 << 20)]
    await broker.publish_round(channel, events)

    got = await _drain(queue, len(events))
    assert [m.message_id for m in got] == [str(e.event_id) for e in events]
    for message, event in zip(got, events, strict=True):
        assert message.body == event.to_bytes()  # byte for byte what publish_confirmed sends
        assert message.type == event.type and message.delivery_mode == 2
        assert message.headers == {"stream": event.stream, "version": event.version}
        assert message.correlation_id == str(event.correlation_id)
    # The channel's own publishes still line up with the broker's delivery tags after it.
    await broker.publish_confirmed(channel, _event(9999))
    assert len(await _drain(queue, 1)) == 1
    await channel.close()


async def test_a_round_on_a_closed_channel_is_a_transient_error(
    amqp: broker.AbstractRobustConnection,
) -> None:
    channel = await amqp.channel(publisher_confirms=True)
    await broker.declare_exchange(channel)
    underlay = await channel.get_underlay_channel()
    await underlay.close()
    with pytest.raises(broker.TRANSIENT_AMQP_ERRORS):
        await asyncio.wait_for(broker.publish_round(channel, [_event(1)]), 10)
