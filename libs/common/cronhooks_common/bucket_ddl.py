"""Create and drop one bucket's partitions in every bucketed table (retention).

The tables are those registered in `eventstore.bucketed_tables` by the migrations of
whoever owns them; each is partitioned by range of `delivery_id` with the same bounds.
Names come from the registry and from bucket numbers, never from input.
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.buckets import partition

EVENTS = "eventstore.events"

# A statement trigger on the partitioned parent does not fire for a statement naming a
# partition; the hot path names partitions, so each one refuses changes itself.
_APPEND_ONLY = """
create trigger events_append_only before update or delete or truncate on {table}
    for each statement execute function eventstore.forbid_change()
"""


async def bucketed_tables(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch("select name from eventstore.bucketed_tables order by name")
    return [r["name"] for r in rows]


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


async def drop_bucket(conn: asyncpg.Connection, bucket: int, lo: int, hi: int) -> None:
    """Drop bucket `bucket` whole: the cleanups registered for it, its partitions in every
    table, its row in the map. Dropping a partition fires no trigger and leaves no dead
    rows behind (the point of partitions: a delete would write and vacuum every row)."""
    cleanups = await conn.fetch("select name, statement from eventstore.bucket_cleanups")
    for cleanup in cleanups:
        await conn.execute(cleanup["statement"], lo, hi)
    for table in await bucketed_tables(conn):
        await conn.execute(f"drop table if exists {partition(table, f'b{bucket}')}")
    await conn.execute("delete from eventstore.buckets where bucket = $1", bucket)
