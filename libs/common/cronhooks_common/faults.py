"""How the services word what went wrong on their side (CONTRACT §15).

`internal error: {what}` ends an attempt (or a delivery, or a fire) that failed for a
reason of ours rather than the agent's — a record the database refused, an event that
could not be handled however often it was tried. `abandoned` is the scheduler's
watchdog's word for a delivery that had no outcome in time (the dispatcher counts it
for the webhook's health). `poison_ender` is how a transactional consumer ends what a
poison event left waiting (the importer's verdict, the scheduler's retries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.buckets import Router
from cronhooks_common.clock import Clock
from cronhooks_common.consumer import PoisonHandler, claim_event
from cronhooks_common.events import Causation, Event, NewEvent, Payload, storable

ABANDONED = "abandoned"
_WHAT = 300  # characters of the exception kept


def internal_error(exc: BaseException) -> str:
    """`internal error: {type}: {message}`, short and storable (no NUL, no lone surrogate)."""
    text = str(exc)
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if len(what) > _WHAT:
        what = what[:_WHAT] + "…"
    return storable(f"internal error: {what}")


# What ends a poison event: the event to append after it on its stream, or None when the
# event leaves nothing waiting (its message is then dead-lettered).
Ending = Callable[[Event, Exception], NewEvent | None]


class Endings:
    """An `Ending` by table, as `Handlers` routes handling: event class -> (its typed data,
    the error) -> the data of the event that ends what it started. An event of another
    type leaves nothing waiting (None)."""

    def __init__(self, table: Mapping[type[Payload], Callable[[Any, Exception], Payload]]) -> None:
        self._by_type = {cls.TYPE: end for cls, end in table.items()}

    def __call__(self, event: Event, error: Exception) -> NewEvent | None:
        end = self._by_type.get(event.type)
        return None if end is None else NewEvent.of(end(event.payload, error))


def poison_ender(
    pool: asyncpg.Pool, *, inbox: str, actor: str, clock: Clock, ending: Ending
) -> PoisonHandler:
    """A consumer's `on_poison` for a transactional service: read the event as the store
    holds it, and append `ending(event, error)` right after it on its stream — once (the
    service's inbox, in the same transaction), and only while nothing else followed it (a
    stream that moved on already has its end: that one stands)."""
    router = Router()

    async def end_by_fault(event_id: UUID, stream: str, error: Exception) -> bool:
        async with pool.acquire() as conn, conn.transaction():
            found = await eventstore.read_events(conn, [(event_id, stream)], router)
            event = found.get(event_id)
            ended = None if event is None else ending(event, error)
            if event is None or ended is None:
                return False
            if not await claim_event(conn, inbox, event):
                return True
            try:
                async with conn.transaction():  # savepoint: a refused append leaves nothing
                    await eventstore.append(
                        conn,
                        event.stream,
                        [ended],
                        expected_version=event.version,
                        causation=Causation.following(event, actor=actor),
                        occurred_at=clock.now(),
                    )
            except eventstore.ConcurrencyError:
                pass
        return True

    return end_by_fault
