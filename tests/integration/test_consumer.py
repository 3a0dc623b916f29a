"""The consumer base: inbox dedupe, dead-lettering, and surviving broker connection loss."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from uuid import uuid4

import aio_pika
import asyncpg
import pytest

from cronhooks_common import broker, eventstore, work
from cronhooks_common.acks import AckBatcher
from cronhooks_common.buckets import Router
from cronhooks_common.consumer import Consumer
from cronhooks_common.events import Causation, Event, NewEvent
from tests.support import rabbit
from tests.support.inprocess import eventually


def make_event(n: int, kind: str = "test.counted") -> Event:
    return Event(uuid4(), kind, f"count-{n}", 1, datetime.now(UTC), {"n": n}, uuid4())


@pytest.fixture
async def effects(pool: asyncpg.Pool) -> asyncpg.Pool:
    await pool.execute("create table public.effects (n int not null, event_id uuid not null)")
    await pool.execute(
        "create table public.test_inbox (event_id uuid primary key, delivery_id bigint not null)"
    )
    return pool


async def publish(
    pool: asyncpg.Pool, amqp: broker.AbstractRobustConnection, events: list[Event]
) -> None:
    """As the services do: append to the event store, then publish (the relay's job). A
    consumer acts only on messages the store holds."""
    await store(pool, events)
    channel = await amqp.channel(publisher_confirms=True)
    await broker.declare_exchange(channel)
    for event in events:
        await broker.publish_confirmed(channel, event)
    await channel.close()


async def store(pool: asyncpg.Pool, events: list[Event]) -> None:
    unique = {event.event_id: event for event in events}.values()
    async with pool.acquire() as conn, conn.transaction():
        await eventstore.append_many(
            conn,
            [
                (
                    e.stream,
                    e.version - 1,
                    NewEvent(e.type, e.data, e.event_id),
                    Causation(e.correlation_id),
                )
                for e in unique
            ],
            occurred_at=datetime.now(UTC),
        )


async def count_effects(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("select count(*) from public.effects"))


def consumer(pool: asyncpg.Pool, amqp: broker.AbstractRobustConnection, **kw: object) -> Consumer:
    async def record(conn: asyncpg.Connection, event: Event) -> None:
        if event.data.get("poison"):
            raise ValueError("cannot handle this one")
        await conn.execute(
            "insert into public.effects (n, event_id) values ($1, $2)",
            event.data["n"],
            event.event_id,
        )

    return _on_test_queue(pool, amqp, transactional=record, **kw)


def _on_test_queue(
    pool: asyncpg.Pool, amqp: broker.AbstractRobustConnection, **kw: object
) -> Consumer:
    return Consumer(
        name="testconsumer",
        amqp=amqp,
        pool=pool,
        inbox="public.test_inbox",
        routing_keys=["test.#"],
        **kw,  # type: ignore[arg-type]
    )


async def test_redelivered_event_has_one_effect(
    effects: asyncpg.Pool, amqp: broker.AbstractRobustConnection
) -> None:
    c = consumer(effects, amqp)
    await c.start()
    events = [make_event(i) for i in range(50)]
    await publish(effects, amqp, events + events[:20])  # 20 duplicates, as after a relay crash
    await eventually(lambda: _equals(count_effects(effects), 50))
    await asyncio.sleep(0.2)
    assert await count_effects(effects) == 50
    await c.stop()


async def _equals(value: object, expected: int) -> bool:
    return await value == expected  # type: ignore[misc]


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_poison_message_is_dead_lettered_and_others_go_on(
    effects: asyncpg.Pool, amqp: broker.AbstractRobustConnection, vhost: str, queue_type: str
) -> None:
    c = consumer(effects, amqp, queue_type=queue_type)
    await c.start()
    poison = Event(
        uuid4(), "test.counted", "p", 1, datetime.now(UTC), {"n": -1, "poison": True}, uuid4()
    )
    await publish(effects, amqp, [make_event(1), poison, make_event(2)])
    channel = await amqp.channel()
    await channel.default_exchange.publish(
        aio_pika.Message(b"not json at all"), routing_key="cronhooks.testconsumer"
    )
    await eventually(lambda: _equals(count_effects(effects), 2))
    dead = await eventually(
        lambda: _at_least(rabbit.queue_depth(vhost, "cronhooks.testconsumer.dead"), 2), timeout=15
    )
    assert dead == 2
    await c.stop()


@pytest.mark.parametrize("hook", ["ends", "declines", "fails"])
async def test_a_poison_event_is_ended_by_the_hook_before_it_would_be_dead_lettered(
    effects: asyncpg.Pool, amqp: broker.AbstractRobustConnection, vhost: str, hook: str
) -> None:
    """CONTRACT §15: what a poison event started is ended by the service (on_poison), not
    left pending behind a dead letter; only what the hook cannot end is dead-lettered."""
    asked: list[tuple[object, str, str]] = []

    async def on_poison(event_id: object, stream: str, error: Exception) -> bool:
        asked.append((event_id, stream, repr(error)))
        if hook == "fails":
            raise RuntimeError("the hook itself broke")
        return hook == "ends"

    c = consumer(effects, amqp, on_poison=on_poison)
    await c.start()
    poison = Event(
        uuid4(), "test.counted", "p", 1, datetime.now(UTC), {"n": -1, "poison": True}, uuid4()
    )
    await publish(effects, amqp, [make_event(1), poison, make_event(2)])
    await eventually(lambda: _equals(count_effects(effects), 2))
    await eventually(lambda: _at_least(_len(asked), 1), timeout=15)
    assert asked == [(poison.event_id, "p", "ValueError('cannot handle this one')")]
    await asyncio.sleep(0.3)
    await c.stop()
    check = await broker.connect(str(amqp.url), name="checker")
    try:
        channel = await check.channel()
        queue = await channel.declare_queue("cronhooks.testconsumer", passive=True)
        assert queue.declaration_result.message_count == 0  # settled, not left unacked
        dead = await channel.declare_queue("cronhooks.testconsumer.dead", passive=True)
        assert dead.declaration_result.message_count == (0 if hook == "ends" else 1)
    finally:
        await check.close()


async def _len(items: list[object]) -> int:
    return len(items)


async def _at_least(value: object, n: int) -> int | None:
    got = await value  # type: ignore[misc]
    return got if got >= n else None


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_consumer_survives_broker_connection_loss(
    effects: asyncpg.Pool, amqp_url: str, vhost: str, queue_type: str
) -> None:
    amqp = await broker.connect(amqp_url, name="victim")
    publisher = await broker.connect(amqp_url, name="publisher")
    c = consumer(effects, amqp, queue_type=queue_type)
    await c.start()
    try:
        first = [make_event(i) for i in range(100)]
        await publish(effects, publisher, first)
        await eventually(lambda: _equals(count_effects(effects), 100))
        assert await rabbit.close_connections(vhost, "cronhooks-victim") == 1
        second = [make_event(i) for i in range(100, 200)]
        await publish(effects, publisher, second)
        # The robust connection reconnects and re-consumes by itself.
        await eventually(lambda: _equals(count_effects(effects), 200), timeout=30)
    finally:
        await c.stop()
        await amqp.close()
        await publisher.close()


async def test_a_batch_ack_settles_every_message_and_no_other(
    effects: asyncpg.Pool, amqp_url: str, vhost: str
) -> None:
    """Batches are settled with one `multiple` ack: after the consumer's connection is
    gone, nothing handled comes back and nothing unhandled was acked away."""
    amqp = await broker.connect(amqp_url, name="batcher")
    c = consumer(effects, amqp, batch_size=100, prefetch=200)
    await c.start()
    try:
        await publish(effects, amqp, [make_event(i) for i in range(250)])
        channel = await amqp.channel()
        await channel.default_exchange.publish(  # a malformed one among them: rejected alone
            aio_pika.Message(b"not json at all"), routing_key="cronhooks.testconsumer"
        )
        await publish(effects, amqp, [make_event(i) for i in range(250, 300)])
        await eventually(lambda: _equals(count_effects(effects), 300))
        await c.stop()
    finally:
        await amqp.close()  # anything unacked would go back to the queue now
    check = await broker.connect(amqp_url, name="checker")
    try:
        queue = await (await check.channel()).declare_queue("cronhooks.testconsumer", passive=True)
        assert queue.declaration_result.message_count == 0  # live count, not the stats API
    finally:
        await check.close()
    dead = await eventually(
        lambda: _at_least(rabbit.queue_depth(vhost, "cronhooks.testconsumer.dead"), 1), timeout=15
    )
    assert dead == 1


async def test_an_ack_for_a_closed_channel_settles_quietly(
    amqp: broker.AbstractRobustConnection,
) -> None:
    """After a broker restart a handled message can belong to the dead channel: its ack
    cannot be sent, and must not wedge the consumer (the broker redelivers it)."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("closing-channel", auto_delete=False)
    await channel.default_exchange.publish(aio_pika.Message(b"x"), routing_key=queue.name)
    underlay = await channel.get_underlay_channel()
    message = await underlay.basic_get(queue.name, no_ack=False)
    acks = AckBatcher()
    acks.delivered(message)
    await channel.close()
    acks.ack(message)
    await asyncio.wait_for(acks.drain(), 5)  # returns, raises nothing


def free_consumer(
    pool: asyncpg.Pool, amqp: broker.AbstractRobustConnection, seen: list[int]
) -> Consumer:
    async def slow_and_out_of_order(event: Event) -> None:
        await asyncio.sleep(random.uniform(0, 0.05))
        seen.append(event.data["n"])

    return _on_test_queue(pool, amqp, free=slow_and_out_of_order, prefetch=50, workers=50)


async def _started_free_consumer(
    pool: asyncpg.Pool, amqp_url: str, name: str
) -> tuple[broker.AbstractRobustConnection, list[int], Consumer]:
    amqp = await broker.connect(amqp_url, name=name)
    seen: list[int] = []
    c = free_consumer(pool, amqp, seen)
    await c.start()
    return amqp, seen, c


async def _queue_is_empty(amqp_url: str) -> None:
    check = await broker.connect(amqp_url, name="checker")
    try:
        queue = await (await check.channel()).declare_queue("cronhooks.testconsumer", passive=True)
        assert queue.declaration_result.message_count == 0  # live count, not the stats API
    finally:
        await check.close()


async def test_free_workers_finishing_out_of_order_settle_every_message_once(
    effects: asyncpg.Pool, amqp_url: str
) -> None:
    """Fifty workers finish in random order: every message is handled once and acked
    (nothing comes back when the connection closes), and no ack settles a message that
    is still running — the broker would close the channel for a tag acked twice."""
    amqp, seen, c = await _started_free_consumer(effects, amqp_url, "free")
    try:
        await publish(effects, amqp, [make_event(i) for i in range(400)])
        await eventually(lambda: _len_at_least(seen, 400), timeout=30)
        await c.stop()
    finally:
        await amqp.close()  # anything unacked would go back to the queue now
    assert sorted(seen) == list(range(400))
    await _queue_is_empty(amqp_url)


async def test_free_workers_resubscribe_after_a_connection_loss(
    effects: asyncpg.Pool, amqp_url: str, vhost: str
) -> None:
    amqp, seen, c = await _started_free_consumer(effects, amqp_url, "victim")
    publisher = await broker.connect(amqp_url, name="publisher")
    try:
        await publish(effects, publisher, [make_event(i) for i in range(100)])
        await eventually(lambda: _len_at_least(seen, 100), timeout=30)
        assert await rabbit.close_connections(vhost, "cronhooks-victim") == 1
        await publish(effects, publisher, [make_event(i) for i in range(100, 200)])
        # Messages in hand at the loss come again (at least once); every one arrives.
        await eventually(lambda: _has_all(seen, 200), timeout=30)
        await c.stop()
    finally:
        await amqp.close()
        await publisher.close()
    await _queue_is_empty(amqp_url)


async def test_a_lost_subscription_is_renewed_by_the_watch(
    effects: asyncpg.Pool, amqp: broker.AbstractRobustConnection
) -> None:
    """aio-pika swallows a failed reopen callback: if a subscription is gone while its
    channel lives (here cancelled behind the consumer's back), the watch renews it."""
    seen: list[int] = []
    c = free_consumer(effects, amqp, seen)
    await c.start()
    try:
        assert c._subscription is not None
        underlay, tag = c._subscription
        await underlay.basic_cancel(tag)
        await publish(effects, amqp, [make_event(i) for i in range(50)])
        await eventually(lambda: _has_all(seen, 50), timeout=15)
        assert c._subscription[1] != tag
    finally:
        await c.stop()


async def _len_at_least(seen: list[int], n: int) -> bool:
    return len(seen) >= n


async def _has_all(seen: list[int], n: int) -> bool:
    return set(seen) >= set(range(n))


async def test_a_message_the_store_does_not_hold_as_sent_is_dropped_and_counted(
    effects: asyncpg.Pool, amqp: broker.AbstractRobustConnection
) -> None:
    """CONTRACT §15: a forged event (not in the store) and an altered one (the store holds
    other data under its id) reach no handler; the genuine ones around them do — with the
    data as stored."""
    from cronhooks_common.trust import DROPPED

    def dropped(reason: str) -> float:
        return DROPPED.labels("testconsumer", reason)._value.get()  # type: ignore[attr-defined]

    before = dropped("not_in_store"), dropped("altered")
    c = consumer(effects, amqp)
    await c.start()
    genuine, altered_one = make_event(1), make_event(2)
    await store(effects, [genuine, altered_one])
    forged = make_event(666)
    altered = Event(
        altered_one.event_id,
        altered_one.type,
        altered_one.stream,
        1,
        altered_one.occurred_at,
        {"n": 999},
        altered_one.correlation_id,
    )
    channel = await amqp.channel(publisher_confirms=True)
    await broker.declare_exchange(channel)
    for event in (forged, altered, genuine):
        await broker.publish_confirmed(channel, event)
    await channel.close()
    await eventually(lambda: _equals(count_effects(effects), 1))
    await asyncio.sleep(0.2)
    rows = await effects.fetch("select n from public.effects")
    assert [r["n"] for r in rows] == [1]
    assert (dropped("not_in_store"), dropped("altered")) == (before[0] + 1, before[1] + 1)
    # The genuine copy of the altered event, published later, is still handled.
    channel = await amqp.channel(publisher_confirms=True)
    await broker.publish_confirmed(channel, altered_one)
    await channel.close()
    await eventually(lambda: _equals(count_effects(effects), 2))
    await c.stop()


async def test_work_notices_replace_the_events_they_carry_and_bound_the_work_in_hand(
    effects: asyncpg.Pool,
    amqp: broker.AbstractRobustConnection,
    vhost: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A queue that took `test.noticed` as events (an earlier version) is unbound from them
    when its consumer takes them as work notices; every event a notice names is handled
    once, never more at a time than the consumer has workers; an event that keeps failing
    dead-letters its notice once the notice's other events are done."""
    old = Consumer(
        name="testconsumer",
        amqp=amqp,
        pool=None,
        inbox="unused",
        routing_keys=["test.noticed"],
        free=_noop,
    )
    await old.start()  # declares the queue with its binding to cronhooks.events
    await old.stop()

    monkeypatch.setitem(work.ROUTES, "test.noticed", "testconsumer")
    handled: list[int] = []
    running, most = 0, 0

    async def on_notice(ref: work.Ref) -> None:
        nonlocal running, most
        key = (ref.event_id, ref.stream)
        stored = (await eventstore.read_events(effects, [key], Router()))[ref.event_id]
        if stored.data.get("poison"):
            raise ValueError("cannot handle this one")
        running += 1
        most = max(most, running)
        await asyncio.sleep(random.random() * 0.02)
        running -= 1
        handled.append(stored.data["n"])

    as_events: list[Event] = []

    async def on_event(event: Event) -> None:
        as_events.append(event)

    workers = 8
    c = Consumer(
        name="testconsumer",
        amqp=amqp,
        pool=None,
        inbox="unused",
        routing_keys=["test.other"],
        free=on_event,
        notice=on_notice,
        prefetch=workers,
        workers=workers,
    )
    await c.start()
    try:
        events = [make_event(i, "test.noticed") for i in range(100)]
        poison = Event(
            uuid4(), "test.noticed", "p", 1, datetime.now(UTC), {"poison": True}, uuid4()
        )
        await publish(effects, amqp, [*events, poison])  # as events: must not arrive any more
        bodies = [body for _, body in work.notices(events)]
        bodies.append(work.notices([events[0], poison])[0][1])  # events[0] again, and poison
        channel = await amqp.channel(publisher_confirms=True)
        exchange = await work.declare_work_exchange(channel)
        for body in bodies:
            await exchange.publish(aio_pika.Message(body), routing_key="testconsumer")
        dead = await eventually(
            lambda: _at_least(rabbit.queue_depth(vhost, "cronhooks.testconsumer.dead"), 1),
            timeout=30,
        )
        await eventually(lambda: _len_at_least(handled, 101), timeout=30)
        await asyncio.sleep(0.3)
    finally:
        await c.stop()
    assert as_events == []  # unbound: what goes to cronhooks.events does not come here
    assert dead == 1  # the poison's notice
    assert sorted(handled) == [0, *range(100)]  # each once by its notice, events[0] twice
    assert 1 < most <= workers
    await _queue_is_empty_of(amqp, "cronhooks.testconsumer")


async def _noop(_: Event) -> None:
    return None


async def _queue_is_empty_of(amqp: broker.AbstractRobustConnection, name: str) -> None:
    queue = await (await amqp.channel()).declare_queue(name, passive=True)
    assert queue.declaration_result.message_count == 0
