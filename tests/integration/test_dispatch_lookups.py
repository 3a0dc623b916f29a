"""The dispatcher's batched pre-POST lookup: one query for a burst, each answer its own —
the event as stored, whether it was handled, and the secret of the stored event's webhook."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.events import Causation, NewEvent
from cronhooks_dispatcher.lookup import DeliveryLookups, Lookup


async def test_a_burst_is_one_query_and_every_answer_matches_its_key(pool: asyncpg.Pool) -> None:
    await pool.execute(
        "insert into shared.webhook_secrets (webhook_id, ciphertext) values (1, 'one'), (2, 'two')"
    )
    news = {
        "fresh": NewEvent("test.requested", {"webhook_id": 2, "delivery_id": 1}),
        "handled": NewEvent("test.requested", {"webhook_id": 1, "delivery_id": 2}),
        "orphan": NewEvent("test.requested", {"webhook_id": 99, "delivery_id": 3}),
        "fire": NewEvent("test.fire", {"job_id": "j"}),
    }
    async with pool.acquire() as conn, conn.transaction():
        stored = {
            name: (await eventstore.append(
                conn, f"s-{name}", [new], expected_version=0,
                causation=Causation.new(), occurred_at=datetime.now(UTC),
            ))[0]
            for name, new in news.items()
        }
    await pool.execute(
        "insert into dispatcher.inbox (event_id, delivery_id) values ($1, 0)",
        stored["handled"].event_id,
    )
    forged = uuid.uuid4()

    queries = 0

    class Counting(DeliveryLookups):
        async def batch_load_fn(self, keys: list[tuple[uuid.UUID, str]]) -> list[Lookup]:
            nonlocal queries
            queries += 1
            return await super().batch_load_fn(keys)

    lookups = Counting(pool)
    got = await asyncio.gather(
        lookups.load((stored["fresh"].event_id, stored["fresh"].stream)),
        lookups.load((stored["handled"].event_id, stored["handled"].stream)),
        lookups.load(
            (stored["orphan"].event_id, stored["orphan"].stream)
        ),  # the webhook's secret is gone
        lookups.load(
            (stored["fire"].event_id, stored["fire"].stream)
        ),  # a one-shot fire has no webhook
        lookups.load((forged, "delivery-1")),  # not in the store
    )
    assert [(g.stored.data if g.stored else None, g.handled, g.sealed_secret) for g in got] == [
        ({"webhook_id": 2, "delivery_id": 1}, False, b"two"),
        ({"webhook_id": 1, "delivery_id": 2}, True, b"one"),
        ({"webhook_id": 99, "delivery_id": 3}, False, None),
        ({"job_id": "j"}, False, None),
        (None, False, None),
    ]
    assert got[0].stored is not None and got[0].stored.stream == "s-fresh"
    assert queries == 1

    # No cache: a request handled since is seen as handled at the next look.
    await pool.execute(
        "insert into dispatcher.inbox (event_id, delivery_id) values ($1, 0)",
        stored["fresh"].event_id,
    )
    assert (await lookups.load((stored["fresh"].event_id, stored["fresh"].stream))).handled
