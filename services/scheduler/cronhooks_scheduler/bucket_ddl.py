"""Create and drop one bucket's partitions in every bucketed table (retention).

The tables are those registered in `eventstore.bucketed_tables` by the migrations of
whoever owns them; each is partitioned by range of `delivery_id` with the same bounds.
Names come from the registry and from bucket numbers, never from input.
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.buckets import DEFAULT, partition

EVENTS = "eventstore.events"

# A statement trigger on the partitioned parent does not fire for a statement naming a
# partition; the hot path names partitions, so each one refuses changes itself.
_APPEND_ONLY = """
create trigger events_append_only before update or delete or truncate on {table}
    for each statement execute function eventstore.forbid_change()
"""


async def bucketed_tables(conn: asyncpg.Connection) -> list[str]:
    """The event store first, then the others by name. Creating a partition locks its
    parent; taking the event store's first, the one nearly every transaction touches,
    means the job waits for its readers before it holds any other table, instead of
    holding the others meanwhile (a writer holding the event store and wanting its own
    table then waited for the job, and the job for it: a deadlock, seen in tests)."""
    rows = await conn.fetch(
        "select name from eventstore.bucketed_tables order by name <> $1, name", EVENTS
    )
    return [r["name"] for r in rows]


async def beyond_defaults(conn: asyncpg.Connection) -> int:
    """The first delivery id above every row of the default partitions (0 if empty). Ids
    that ran beyond every bucket landed there; a new bucket must start above them (its
    range may not hold rows of the default partition), and they stay where they are."""
    highest = 0
    for table in await bucketed_tables(conn):
        key = await conn.fetchval(
            "select a.attname from pg_partitioned_table p"
            " join pg_attribute a on a.attrelid = p.partrelid and a.attnum = p.partattrs[0]"
            " where p.partrelid = $1::regclass",
            table,
        )
        top = await conn.fetchval(f"select max({key}) from {partition(table, DEFAULT)}")
        highest = max(highest, top or 0)
    return highest + 1 if highest else 0


async def create_bucket(conn: asyncpg.Connection, bucket: int, lo: int, hi: int) -> None:
    """Bucket `bucket` = delivery ids [lo, hi): its row in the map and its partitions."""
    await conn.execute(
        "insert into eventstore.buckets (bucket, lo, hi) values ($1, $2, $3)", bucket, lo, hi
    )
    for table in await bucketed_tables(conn):
        name = partition(table, f"b{bucket}")
        await conn.execute(
            f"create table {name} partition of {table} for values from ({lo:d}) to ({hi:d})"
        )
        if table == EVENTS:
            await conn.execute(_APPEND_ONLY.format(table=name))
    await bump_generation(conn)


async def drop_bucket(conn: asyncpg.Connection, bucket: int, lo: int, hi: int) -> None:
    """Drop bucket `bucket` whole: the cleanups registered for it, its partitions in every
    table, its row in the map. Dropping a partition fires no trigger and leaves no dead
    rows behind (the point of partitions: a delete would write and vacuum every row)."""
    cleanups = await conn.fetch("select name, statement from eventstore.bucket_cleanups")
    for cleanup in cleanups:
        await conn.execute(cleanup["statement"], lo, hi)
    for table in await bucketed_tables(conn):
        await drop_partition(conn, table, partition(table, f"b{bucket}"))
    await conn.execute("delete from eventstore.buckets where bucket = $1", bucket)
    await bump_generation(conn)


async def seal_bucket(conn: asyncpg.Connection, bucket: int) -> tuple[int, int] | None:
    """Make bucket `bucket`'s events partition refuse inserts and record its last event in
    tail order; None if it holds no event. Call once every delivery in it has finished:
    nothing more is ever appended to it, so tails need not read it once past that event.
    (NOT VALID: the rows it holds are not checked, only new ones, which all fail.)"""
    name = partition(EVENTS, f"b{bucket}")
    await conn.execute(f"alter table {name} add constraint sealed check (false) not valid")
    # Under the constraint's lock every writer of the partition has committed.
    last = await conn.fetchrow(
        f"select txid, position from {name} order by txid desc, position desc limit 1"
    )
    txid, position = (last["txid"], last["position"]) if last else (0, 0)
    await conn.execute(
        "update eventstore.buckets set sealed_txid = $2, sealed_position = $3 where bucket = $1",
        bucket,
        txid,
        position,
    )
    await bump_generation(conn)
    return (txid, position) if last else None


async def drop_attempt_logs(conn: asyncpg.Connection, bucket: int) -> None:
    """Drop bucket `bucket`'s partitions of the attempt-log tables and note it in the map
    (projections then write no body for the bucket: a rebuild keeps what was dropped
    dropped). Its rows that arrive later land in the default partition, never read."""
    for r in await conn.fetch("select name from eventstore.attempt_log_tables"):
        await drop_partition(conn, r["name"], partition(r["name"], f"b{bucket}"))
    await conn.execute(
        "update eventstore.buckets set logs_dropped_at = now() where bucket = $1", bucket
    )


async def drop_partition(conn: asyncpg.Connection, parent: str, name: str) -> None:
    """Drop one partition, taking its parent's lock first. DROP locks the partition, then
    the parent; a query locks the parent, then its partitions: taken the other way round,
    a drop and a read of both deadlock (seen in tests, a GraphQL read of the attempts)."""
    await conn.execute(f"lock table {parent} in access exclusive mode")
    await conn.execute(f"drop table if exists {name}")


async def bump_generation(conn: asyncpg.Connection) -> None:
    await conn.execute("update eventstore.bucket_generation set generation = generation + 1")
