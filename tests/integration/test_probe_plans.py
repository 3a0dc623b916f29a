"""eventstore.probe_sql stays one index probe per key in a plan made while the table was
nearly empty (asyncpg keeps a prepared statement's generic plan), where `= any($1)`
keeps a seq scan as the table grows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from cronhooks_common.eventstore import probe_sql

# A partition of the event store as it is before its first rows (never analyzed).
_TABLE = """
create table public.growing (like eventstore.events including all)
    with (autovacuum_enabled = false)
"""
_GROW = """
insert into public.growing
    (stream, version, event_id, type, data, correlation_id, occurred_at, delivery_id, txid,
     position)
select 'delivery-' || g, 1, gen_random_uuid(), 'delivery.requested',
       jsonb_build_object('webhook_id', g % 100, 'delivery_id', g), gen_random_uuid(),
       now(), g, 1, g
from generate_series($1::int, $2::int) g
"""
_KEYS = "'{5,6,7,8,9,10,11,12,13,14}'::bigint[]"


@pytest.fixture
async def conn(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A connection with `public.growing` created empty, dropped afterwards."""
    async with pool.acquire() as c:
        await c.execute(_TABLE)
        try:
            yield c
        finally:
            await c.execute("deallocate all")
            await c.execute("reset plan_cache_mode")
            await c.execute("drop table public.growing")


async def _explain(conn: asyncpg.Connection, statement: str) -> str:
    return "\n".join(r[0] for r in await conn.fetch(f"explain execute {statement}({_KEYS})"))


async def test_a_probe_planned_on_a_small_table_still_seeks_once_it_has_grown(
    conn: asyncpg.Connection,
) -> None:
    await conn.execute(_GROW, 1, 200)  # a fresh install's kept partition, say
    await conn.execute("set plan_cache_mode = force_generic_plan")
    await conn.execute(
        "prepare naive as select * from public.growing where position = any($1::bigint[])"
        " order by txid, position"
    )
    probe = probe_sql("public.growing", "position", "bigint", columns="*")
    await conn.execute(f"prepare probe as {probe} order by txid, position")
    for statement in ("naive", "probe"):  # their generic plans, made now
        await _explain(conn, statement)
    await conn.execute(_GROW, 201, 20000)

    assert "Seq Scan on growing" in await _explain(conn, "naive")  # the trap
    plan = await _explain(conn, "probe")
    assert "Seq Scan on growing" not in plan, plan
    assert "Index Scan using growing_position_idx" in plan, plan


async def test_a_probe_answers_each_key_in_order_and_skips_the_missing(
    conn: asyncpg.Connection,
) -> None:
    await conn.execute(_GROW, 1, 20000)
    probe = probe_sql("public.growing", "position", "bigint", columns="*")
    rows = await conn.fetch(probe, [20000, 7, 123456, 7])
    assert [(r["i"], r["position"]) for r in rows] == [(1, 20000), (2, 7), (4, 7)]
    by_id = probe_sql("public.growing", "event_id", "uuid", columns="position")
    ids = [rows[0]["event_id"], uuid.uuid4(), rows[1]["event_id"]]
    assert [(r["i"], r["position"]) for r in await conn.fetch(by_id, ids)] == [
        (1, 20000),
        (3, 7),
    ]
