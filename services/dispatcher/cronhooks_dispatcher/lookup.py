"""Step 1, look up: what the consumer hands over is only news. Before acting on a message
the dispatcher asks what the event store holds under its event id (the event store
decides — CONTRACT §15), whether it was handled before (inbox), and what the sealed secret
of the stored event's webhook is (with its scheme, key pair and any previous secret still
in a rotation's grace, CONTRACT §17; none for a one-shot fire); then hands the stored event
to its handler (`HANDLERS`, app.py), or a poison event to its ending (`ENDINGS`).

A herd arrives as a burst of messages; asking once per message costs a database round
trip each, about as much CPU as the POST itself. The loader gathers the questions of one
event-loop iteration into one query (queries.LOOKUP).

The stored event is looked for in the partition of the stream the message names
(`cronhooks_common.buckets`): a query through the partitioned parent would plan, lock and
start every bucket's partition on each call (7 keys: 0.2 → 1.1 ms with 33 partitions,
`python -m bench retention --lookups`). A message that misnames its stream finds nothing,
as a forged one should."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

import asyncpg
from aiodataloader import DataLoader

from cronhooks_common import work
from cronhooks_common.buckets import Router, delivery_of, fetch_routed, partition
from cronhooks_common.events import Event
from cronhooks_common.eventstore import event_from_row
from cronhooks_common.handlers import Handlers
from cronhooks_common.trust import as_noticed, as_stored
from cronhooks_common.webhook_keys import SealedKeys
from cronhooks_dispatcher import queries
from cronhooks_dispatcher.deps import Call, Deps, Fault

CONSUMER = "dispatcher"
# `delivery.requested` comes in work notices, many to a message (work.py).
NOTICED = work.carried_to(CONSUMER)


class Lookup(NamedTuple):
    stored: Event | None  # the event as the store holds it; None: not there (forged)
    # Its outcome is recorded: the inbox holds the event id, or its stream has moved past
    # it (another service ended the delivery meanwhile: the scheduler's watchdog).
    handled: bool
    sealed_secret: SealedKeys | None  # of the stored event's webhook; None: none (or deleted)


def sealed_keys(row: asyncpg.Record) -> SealedKeys | None:
    """The webhook's signing state as stored, or None. A previous secret is handed over
    with its expiry even after it: the clock that signs decides (`SecretKeys.at`); the
    scheduler's retention job clears expired ones from the table."""
    if row["ciphertext"] is None:
        return None
    return SealedKeys(
        row["scheme"],
        row["ciphertext"],
        row["private_key"],
        row["previous_ciphertext"],
        row["previous_private_key"],
        row["previous_expires_at"],
    )


Key = tuple[UUID, str]  # (event id, stream) as the message names them


class DeliveryLookups(DataLoader[Key, Lookup]):
    def __init__(self, pool: asyncpg.Pool) -> None:
        # No cache: an answer is only true at the moment it is read.
        super().__init__(cache=False, max_batch_size=1000)
        self._pool = pool
        self._router = Router()

    async def batch_load_fn(self, keys: list[Key]) -> list[Lookup]:
        async def fetch(
            suffix: str, group: list[tuple[int, Key]]
        ) -> list[tuple[int, asyncpg.Record]]:
            rows = await self._pool.fetch(
                queries.LOOKUP.format(
                    events=partition("eventstore.events", suffix),
                    inbox=partition("dispatcher.inbox", suffix),
                ),
                [event_id for _, (event_id, _) in group],
            )
            # The query numbers its keys from 1; give back the batch's own index.
            return [(group[r["i"] - 1][0], r) for r in rows]

        indexed = list(enumerate(keys))
        found = await fetch_routed(
            self._pool, self._router, indexed, lambda k: delivery_of(k[1][1]), fetch
        )
        by_index = {
            i: Lookup(
                None if r["event_id"] is None else event_from_row(r),
                r["handled"],
                sealed_keys(r),
            )
            for i, r in found
        }
        return [by_index[i] for i in range(len(keys))]


@dataclass(frozen=True, slots=True)
class Receiver:
    """What the consumer calls: an event message, a work notice's event, a poison event.
    Each is looked up with the others in hand, and acted on as the store holds it."""

    lookups: DeliveryLookups
    deps: Deps
    handlers: Handlers[Call]
    endings: Handlers[Fault]

    async def on_event(self, sent: Event) -> None:
        found = await self.lookups.load((sent.event_id, sent.stream))
        event = as_stored(sent, found.stored, consumer=CONSUMER)
        if event is not None:
            await self.handlers.handle(Call(self.deps, found.handled, found.sealed_secret), event)

    async def on_notice(self, ref: work.Ref) -> None:
        found = await self.lookups.load((ref.event_id, ref.stream))
        event = as_noticed(ref.event_id, found.stored, types=NOTICED, consumer=CONSUMER)
        if event is not None:
            await self.handlers.handle(Call(self.deps, found.handled, found.sealed_secret), event)

    async def end_by_fault(self, event_id: UUID, stream: str, error: Exception) -> bool:
        """The consumer's `on_poison` (CONTRACT §15): what a poison event started ends
        instead of waiting behind a dead letter — the delivery fails, the fire ends failed.
        False (dead-letter the message) for an event that is not stored or starts nothing."""
        found = await self.lookups.load((event_id, stream))
        event = found.stored
        if event is None:
            return False  # not in the store: nothing started
        if found.handled:
            return True  # ended meanwhile (a redelivery, the watchdog)
        if event.type not in self.endings:
            return False
        await self.endings.handle(Fault(self.deps, error), event)
        return True
