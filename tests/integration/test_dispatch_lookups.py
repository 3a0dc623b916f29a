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
from cronhooks_dispatcher.queries import LOOKUP


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
    assert [
        (g.stored.data if g.stored else None, g.handled, g.sealed_secret and g.sealed_secret.secret)
        for g in got
    ] == [
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


_FRESH_BUCKET = """
create table public.fresh_events (like eventstore.events including all)
    with (autovacuum_enabled = false);
create table public.fresh_inbox (like dispatcher.inbox including all)
    with (autovacuum_enabled = false);
"""
_GROW = """
insert into public.fresh_events
        (stream, version, event_id, type, data, correlation_id, occurred_at, delivery_id, txid)
    select 'delivery-' || g, 1, gen_random_uuid(), 'delivery.requested',
           jsonb_build_object('webhook_id', g % 100, 'delivery_id', g), gen_random_uuid(),
           now(), g, 1
    from generate_series(1, 20000) g;
insert into public.fresh_inbox (event_id, delivery_id)
    select event_id, delivery_id from public.fresh_events where delivery_id % 2 = 0;
"""


async def test_the_lookup_probes_by_index_in_a_bucket_never_analyzed(pool: asyncpg.Pool) -> None:
    # A bucket's partitions start empty and have no statistics in their first minutes; the
    # plan asyncpg's prepared statement settles on (the generic one, made while they were
    # empty) must still seek, not scan, once they hold a herd. As a join it was a hash join
    # over both partitions (16-28 ms a call in a 10,000 herd); with the inbox probed by
    # event id alone, a seq scan of the inbox per key (14 ms a call, 2.8 s of Postgres CPU
    # in a 10,000 herd): its narrow rows make a scan under `limit 1` look cheap.
    sql = LOOKUP.format(events="public.fresh_events", inbox="public.fresh_inbox")
    async with pool.acquire() as conn:
        await conn.execute(_FRESH_BUCKET)
        try:
            await conn.execute("set plan_cache_mode = force_generic_plan")
            await conn.execute(f"prepare lookup as {sql}")
            await conn.fetch(f"explain execute lookup('{{{uuid.uuid4()}}}'::uuid[])")
            await conn.execute(_GROW)  # the generic plan above was made on empty tables
            assert await conn.fetchval(
                "select reltuples from pg_class where oid = 'public.fresh_inbox'::regclass"
            ) < 0  # never analyzed
            keys = await conn.fetchval(
                "select array_agg(event_id order by delivery_id) from public.fresh_events"
                " where delivery_id between 100 and 109"
            )
            literal = "'{" + ",".join(str(k) for k in keys) + "}'::uuid[]"
            plan = "\n".join(
                r[0] for r in await conn.fetch(f"explain execute lookup({literal})")
            )
            assert "Seq Scan on fresh_events" not in plan, plan
            assert "Seq Scan on fresh_inbox" not in plan, plan
            rows = await conn.fetch(sql, [*keys, uuid.uuid4()])
            assert [(r["i"], r["event_id"], r["handled"]) for r in rows] == [
                *((i + 1, key, i % 2 == 0) for i, key in enumerate(keys)),
                (11, None, False),
            ]
        finally:
            await conn.execute("deallocate all")
            await conn.execute("reset plan_cache_mode")
            await conn.execute("drop table public.fresh_events, public.fresh_inbox")
