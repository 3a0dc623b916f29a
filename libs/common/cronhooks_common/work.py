"""Work notices: how the dispatcher hears of `delivery.requested`, many events a message.

Every event still goes to `cronhooks.events` as a message of its own (CONTRACT §6), for
every subscriber. But no service queue binds `delivery.requested` there: the relay also
sends a *notice* per up to NOTICE_SIZE such events of a batch to the direct exchange
`cronhooks.work`, routed by consumer name, and the dispatcher's queue takes those instead.

Why: a herd is one `delivery.requested` per webhook, and on this path RabbitMQ was a third
of the CPU per delivery. A persistent message that a durable queue takes costs the broker
~4 × one it routes nowhere (the queue writes it, delivers it, takes its ack), and the
consumer ~90 µs of its one core to read and settle it (bench amqp). A notice of 64 events
costs that once for all of them.

A notice names events by (event id, stream) and says nothing else: the consumer reads each
one from the event store (it would anyway, the store decides: trust.py) and acts only on
stored events of the types notices bring it. Publishing a notice therefore can make a
consumer do nothing it would not do anyway, and readers (broker_users.py) cannot publish.
The relay deletes a batch's outbox rows only once its messages *and* its notices are
confirmed: a crash in between sends both again (consumers skip what they handled).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractExchange
from pamqp.commands import Basic

from cronhooks_common.events import Event, EventType
from cronhooks_common.jsonfast import dumps_bytes, loads

WORK_EXCHANGE = "cronhooks.work"
NOTICE_TYPE = "cronhooks.notice"
NOTICE_SIZE = 64  # events per notice: the broker's work shrinks by this factor
MAX_STREAM = 200  # a stream name is short; a longer one is not from the relay

# Event types that reach a consumer as notices, and the consumer (routing key) they go to.
ROUTES: dict[str, str] = {EventType.DELIVERY_REQUESTED: "dispatcher"}

NOTICE_PROPERTIES = Basic.Properties(
    content_type="application/json", delivery_mode=2, message_type=NOTICE_TYPE
)


@dataclass(frozen=True, slots=True)
class Ref:
    """An event a notice names: where the consumer reads it from the store."""

    event_id: UUID
    stream: str


def carried_to(consumer: str) -> frozenset[str]:
    """The event types that reach `consumer` as notices (not from `cronhooks.events`)."""
    return frozenset(kind for kind, route in ROUTES.items() if route == consumer)


def notices(events: Sequence[Event]) -> list[tuple[str, bytes]]:
    """(routing key, body) of the notices for a batch's events, in batch order."""
    by_route: dict[str, list[list[str]]] = defaultdict(list)
    for event in events:
        route = ROUTES.get(event.type)
        if route is not None:
            by_route[route].append([str(event.event_id), event.stream])
    return [
        (route, dumps_bytes({"events": refs[i : i + NOTICE_SIZE]}))
        for route, refs in by_route.items()
        for i in range(0, len(refs), NOTICE_SIZE)
    ]


def parse(body: bytes) -> list[Ref]:
    """The events a notice names; ValueError (naming what is wrong) if it is not a notice."""
    try:
        value = loads(body)
    except ValueError:
        raise ValueError("events: a notice is a JSON object") from None
    refs = value.get("events") if isinstance(value, dict) else None
    if not isinstance(refs, list) or not 0 < len(refs) <= NOTICE_SIZE:
        raise ValueError(f"events: a notice names 1 to {NOTICE_SIZE} events")
    parsed = []
    for item in refs:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(part, str) for part in item)
            and 0 < len(item[1]) <= MAX_STREAM
        ):
            raise ValueError("events: each is [event id, stream], both strings")
        try:
            parsed.append(Ref(UUID(item[0]), item[1]))
        except ValueError:
            raise ValueError(f"events: {item[0]!r} is not an event id") from None
    return parsed


async def declare_work_exchange(channel: AbstractChannel) -> AbstractExchange:
    return await channel.declare_exchange(
        WORK_EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True
    )
