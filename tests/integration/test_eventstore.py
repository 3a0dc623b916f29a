from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from cronhooks_common import eventstore
from cronhooks_common.events import Causation, NewEvent
from cronhooks_scheduler import bucket_ddl

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)


async def _append(conn: asyncpg.Connection, stream: str, expected: int, n: int = 1) -> list:  # type: ignore[type-arg]
    return await eventstore.append(
        conn,
        stream,
        [NewEvent("test.happened", {"i": i}) for i in range(n)],
        expected_version=expected,
        causation=Causation.new("test"),
        occurred_at=NOW,
    )


async def test_append_and_read_back(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        written = await _append(conn, "s-1", 0, 3)
    assert [e.version for e in written] == [1, 2, 3]
    async with pool.acquire() as conn:
        read = await eventstore.read_stream(conn, "s-1")
        assert [(e.event_id, e.version, e.data) for e in read] == [
            (e.event_id, e.version, e.data) for e in written
        ]
        assert read[0].correlation_id == read[2].correlation_id
        assert await eventstore.stream_version(conn, "s-1") == 3
        # Every appended event is waiting in the outbox.
        assert await conn.fetchval("select count(*) from eventstore.outbox") == 3


async def test_wrong_expected_version_is_a_conflict_not_an_overwrite(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await _append(conn, "s-2", 0)
    with pytest.raises(eventstore.ConcurrencyError):
        async with pool.acquire() as conn, conn.transaction():
            await _append(conn, "s-2", 0)
    async with pool.acquire() as conn:
        [only] = await eventstore.read_stream(conn, "s-2")
        assert only.data == {"i": 0}
        assert await conn.fetchval("select count(*) from eventstore.outbox") == 1


async def test_concurrent_writers_of_one_version_exactly_one_wins(pool: asyncpg.Pool) -> None:
    async def attempt() -> bool:
        try:
            async with pool.acquire() as conn, conn.transaction():
                await _append(conn, "s-3", 0)
                await asyncio.sleep(0.02)
            return True
        except eventstore.ConcurrencyError:
            return False

    results = await asyncio.gather(*(attempt() for _ in range(8)))
    assert results.count(True) == 1
    async with pool.acquire() as conn:
        assert await eventstore.stream_version(conn, "s-3") == 1


async def test_events_are_append_only(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await _append(conn, "s-4", 0)
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await conn.execute("update eventstore.events set data = '{}'")
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await conn.execute("delete from eventstore.events")


async def test_append_many_is_all_or_nothing(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await _append(conn, "m-2", 0)
    batch = [(f"m-{i}", 0, NewEvent("test.happened", {}), Causation.new()) for i in range(1, 4)]
    with pytest.raises(eventstore.ConcurrencyError) as err:
        async with pool.acquire() as conn, conn.transaction():
            await eventstore.append_many(conn, batch, occurred_at=NOW)
    assert err.value.stream == "m-2"
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from eventstore.events") == 1
    batch[1] = ("m-2", 1, NewEvent("test.happened", {}), Causation.new())
    async with pool.acquire() as conn, conn.transaction():
        written = await eventstore.append_many(conn, batch, occurred_at=NOW)
    assert [(e.stream, e.version) for e in written] == [("m-1", 1), ("m-2", 2), ("m-3", 1)]


async def test_large_event_data_is_compressed_with_lz4_in_every_partition(
    pool: asyncpg.Pool,
) -> None:
    # Migration 0032: an outcome event outgrows the toast threshold (about 2 KB); lz4
    # compresses and decompresses it faster than pglz. A bucket opened later inherits it.
    async with pool.acquire() as conn, conn.transaction():
        lo = await conn.fetchval("select max(hi) from eventstore.buckets")
        bucket = await conn.fetchval("select max(bucket) + 1 from eventstore.buckets")
        await bucket_ddl.create_bucket(conn, bucket, lo, lo + 1000)
    methods = await pool.fetch(
        "select c.oid::regclass::text as rel, a.attcompression::text as method"
        " from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attname = 'data'"
        " where c.oid = 'eventstore.events'::regclass or c.oid in"
        " (select inhrelid from pg_inherits where inhparent = 'eventstore.events'::regclass)"
    )
    assert f"eventstore.events_b{bucket}" in {r["rel"] for r in methods}
    assert {r["rel"]: r["method"] for r in methods} == {r["rel"]: "l" for r in methods}
    async with pool.acquire() as conn, conn.transaction():
        big = {"webhook_id": 1, "request_body": " ".join(str(i) for i in range(2000))}
        await eventstore.append(
            conn,
            "webhook-1",
            [NewEvent("test.large", big)],
            expected_version=0,
            causation=Causation.new(),
            occurred_at=datetime.now(UTC),
        )
    stored = await pool.fetchrow(
        "select pg_column_compression(data) as method, octet_length(data::text) as size"
        " from eventstore.events where stream = 'webhook-1'"
    )
    assert stored["method"] == "lz4" and stored["size"] > 8000
