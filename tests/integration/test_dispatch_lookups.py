"""The dispatcher's batched pre-POST lookup: one query for a burst, each answer its own."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from cronhooks_dispatcher.lookup import DeliveryLookups, Lookup, LookupKey


async def test_a_burst_is_one_query_and_every_answer_matches_its_key(pool: asyncpg.Pool) -> None:
    handled, fresh, orphan = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await pool.execute(
        "insert into shared.webhook_secrets (webhook_id, ciphertext) values (1, 'one'), (2, 'two')"
    )
    await pool.execute("insert into dispatcher.inbox (event_id) values ($1)", handled)

    queries = 0

    class Counting(DeliveryLookups):
        async def batch_load_fn(self, keys: list[LookupKey]) -> list[Lookup]:
            nonlocal queries
            queries += 1
            return await super().batch_load_fn(keys)

    lookups = Counting(pool)
    got = await asyncio.gather(
        lookups.load(LookupKey(fresh, 2)),
        lookups.load(LookupKey(handled, 1)),
        lookups.load(LookupKey(orphan, 99)),  # the webhook's secret is gone
        lookups.load(LookupKey(fresh, 1)),
        lookups.load(LookupKey(handled)),  # a one-shot fire asks only the inbox
    )
    assert got == [
        Lookup(False, b"two"),
        Lookup(True, b"one"),
        Lookup(False, None),
        Lookup(False, b"one"),
        Lookup(True, None),
    ]
    assert queries == 1

    # No cache: a request handled since is seen as handled at the next look.
    await pool.execute("insert into dispatcher.inbox (event_id) values ($1)", fresh)
    assert await lookups.load(LookupKey(fresh, 2)) == Lookup(True, b"two")
