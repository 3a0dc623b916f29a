"""AMQP ceiling: what one event costs on the broker path alone, on this box.

N `delivery.requested` events are published through the relay's own publish path
(`OutboxRelay._publish`: rounds of one event per stream, publisher confirms, then the work
notices naming them, which no queue takes here) to a queue
on a scratch vhost, then consumed with manual acks the way the dispatcher's consumer
does (aio-pika, prefetch, one ack per message). No database, no HTTP: the rate and the
CPU per event here bound what any delivery path through RabbitMQ can do, and the CPU
split (client library vs broker) shows which side a saving can come from.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from urllib.parse import quote

import aio_pika
import aiohttp

from bench import cpu
from bench.common import table
from bench.harness import AUTH, MANAGEMENT
from cronhooks_common.broker import declare_exchange
from cronhooks_common.consumer import Consumer
from cronhooks_common.events import Event
from cronhooks_common.relay import OutboxRelay
from cronhooks_common.work import declare_work_exchange

N = 20_000
ROUND = 1_000  # the relay's batch size
PREFETCH = 200


def _events(n: int) -> list[Event]:
    data = {
        "delivery_id": 1,
        "webhook_id": 2,
        "attempt": 1,
        "trigger": "schedule",
        "scheduled_for": "2026-12-01T00:00:00+00:00",
        "missed_count": 0,
        "target": {
            "url": "http://127.0.0.1:9/hook",
            "instruction": "summarise the notes changed today " * 6,
            "timeout_seconds": 30,
            "read_patterns": ["*"],
            "write_patterns": ["*"],
            "max_retries": 3,
        },
    }
    now = datetime.now(UTC)
    return [
        Event(
            event_id=uuid.uuid4(),
            type="delivery.requested",
            stream=f"delivery-{i}",
            version=1,
            occurred_at=now,
            data=data,
            correlation_id=uuid.uuid4(),
            actor="scheduler",
        )
        for i in range(n)
    ]


async def _publish_all(channel: aio_pika.abc.AbstractChannel, events: list[Event]) -> None:
    for i in range(0, len(events), ROUND):
        await OutboxRelay._publish(events[i : i + ROUND], channel)


def _sink(
    connection: aio_pika.abc.AbstractRobustConnection, n: int
) -> tuple[Consumer, asyncio.Event]:
    """The services' consumer with free workers (as the dispatcher runs it), counting."""
    handled = 0
    done = asyncio.Event()

    async def count(_: Event) -> None:
        nonlocal handled
        handled += 1
        if handled >= n:
            done.set()

    consumer = Consumer(
        name="bench-sink",
        amqp=connection,
        pool=None,
        inbox="unused",
        routing_keys=["#"],
        free=count,
        prefetch=PREFETCH,
        workers=PREFETCH,
    )
    return consumer, done


async def _measure(
    connection: aio_pika.abc.AbstractRobustConnection,
    channel: aio_pika.abc.AbstractChannel,
    n: int,
) -> list[list[object]]:
    queue = await channel.declare_queue("bench.sink", durable=True)
    await queue.bind("cronhooks.events", routing_key="#")
    events = _events(n)

    ours, broker, wall = cpu.own_ms(), cpu.snapshot(), time.perf_counter()
    await _publish_all(channel, events)
    published = [
        time.perf_counter() - wall,
        cpu.own_ms() - ours,
        cpu.spent_ms(broker, cpu.snapshot()),
    ]

    await channel.set_qos(prefetch_count=PREFETCH)
    got = 0
    done = asyncio.Event()

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        nonlocal got
        Event.from_bytes(message.body)  # as every consumer does
        await message.ack()
        got += 1
        if got >= n:
            done.set()

    ours, broker, wall = cpu.own_ms(), cpu.snapshot(), time.perf_counter()
    tag = await queue.consume(on_message)
    await asyncio.wait_for(done.wait(), 300)
    consumed = [
        time.perf_counter() - wall,
        cpu.own_ms() - ours,
        cpu.spent_ms(broker, cpu.snapshot()),
    ]
    await queue.cancel(tag)
    await queue.delete()

    # The same again through the services' consumer: raw deliveries, bulk acks. Its queue
    # is declared (a start and stop) before the events are published into it.
    declaring, _ = _sink(connection, n)
    await declaring.start()
    await declaring.stop()
    await _publish_all(channel, _events(n))
    consumer, done = _sink(connection, n)
    ours, broker, wall = cpu.own_ms(), cpu.snapshot(), time.perf_counter()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 300)
    ours_consumed = [
        time.perf_counter() - wall,
        cpu.own_ms() - ours,
        cpu.spent_ms(broker, cpu.snapshot()),
    ]
    await consumer.stop()

    rows = []
    for name, (seconds, client_ms, spent) in (
        ("publish with confirms (relay path)", published),
        ("consume with manual acks (aio-pika, one ack each)", consumed),
        ("consume with cronhooks' Consumer (free workers, bulk acks)", ours_consumed),
    ):
        rows.append(
            [
                name,
                n,
                f"{n / seconds:.0f}",
                f"{client_ms * 1000 / n:.0f}",
                f"{spent['rabbitmq'] * 1000 / n:.0f}",
            ]
        )
    return rows


async def ceiling(n: int = N) -> list[tuple[str, str]]:
    vhost = f"cronhooks-bench-amqp-{uuid.uuid4().hex[:8]}"
    path = quote(vhost, safe="")
    async with aiohttp.ClientSession(headers=AUTH) as mgmt:
        await mgmt.put(f"{MANAGEMENT}/vhosts/{path}")
        await mgmt.put(
            f"{MANAGEMENT}/permissions/{path}/guest",
            json={"configure": ".*", "write": ".*", "read": ".*"},
        )
    try:
        connection = await aio_pika.connect_robust(f"amqp://guest:guest@127.0.0.1:5672/{path}")
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await declare_exchange(channel)
            await declare_work_exchange(channel)  # the relay path sends work notices too
            rows = await _measure(connection, channel, n)
    finally:
        async with aiohttp.ClientSession(headers=AUTH) as mgmt:
            await mgmt.delete(f"{MANAGEMENT}/vhosts/{path}")
    return [
        (
            "AMQP ceiling: one delivery.requested-sized event through RabbitMQ alone",
            table(
                ["step", "events", "events/s", "client CPU µs/event", "broker CPU µs/event"], rows
            ),
        )
    ]
