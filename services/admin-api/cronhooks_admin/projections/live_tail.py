"""The commit-order tail (cronhooks_common.tail) over the live partitions only, for the
projector (projector.py).

Every event that can still be appended lands in a live partition: the kept one, the
default one, or a bucket that is not sealed (the scheduler's retention job seals a bucket
once all its deliveries have finished; its partition then refuses inserts). A sealed
bucket is read until the tail's checkpoint has passed its last event, then never again.
So the tail reads a handful of partitions (kept, default, the open bucket, its spare and
yesterday's until it is sealed) instead of one per day of retention; through the
partitioned parent a generic plan would lock and start all of them at every read.

The set of partitions changes when the retention job creates, seals or drops a bucket,
and bumps `eventstore.bucket_generation` in the same transaction. The read checks the
generation it was built for in the same statement (one snapshot): if it moved, the read
returns nothing but that news, and the tail loads the partitions again. So a tail never
reads an older set of partitions than the events its snapshot can see. (A dropped
partition makes the statement fail instead: the caller `forget`s and reads again; the job
drops only buckets every tail has read past.)
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.buckets import DEFAULT, KEPT, partition
from cronhooks_common.events import Event
from cronhooks_common.eventstore import EVENT_COLUMNS
from cronhooks_common.tail import WATERMARK, Checkpoint, events_after

EVENTS = "eventstore.events"

# Each partition's branch is ordered and limited itself: then the generic plan is a few
# index seeks and a merge. (As one union ordered and limited outside, Postgres's generic
# plan read the partitions whole: 7-12 ms a call against 0.3.)
_BRANCH = f"""
    (select txid, position, {EVENT_COLUMNS} from {{table}}
     where (txid, position) > ($1, $2) and txid < {WATERMARK}
     order by txid, position limit $3)"""
_READ = f"""
with g as (select generation <> $4 as stale from eventstore.bucket_generation)
select g.stale, e.* from g left join lateral (
    select txid, position, {EVENT_COLUMNS} from ({{branches}}) u
    where not g.stale
    order by txid, position
    limit $3
) e on true
"""
# As cronhooks_common.tail's: the smallest such txid, an index seek per partition, in one
# statement.
_HELD_BACK_BRANCH = f"(select min(txid) from {{table}} where txid > $1 and txid >= {WATERMARK})"
# One statement, one snapshot: the generation and the buckets agree.
_PARTITIONS = """
select g.generation, b.bucket, b.sealed_txid, b.sealed_position
from eventstore.bucket_generation g left join eventstore.buckets b on true
order by b.lo
"""


class LiveTail:
    """`read_after` and `held_back` of cronhooks_common.tail, over the live partitions."""

    def __init__(self) -> None:
        self._generation: int | None = None
        # (bucket, its last event once sealed) for every bucket of the map
        self._buckets: list[tuple[int, tuple[int, int] | None]] = []

    async def read_after(
        self, conn: asyncpg.Connection, after: Checkpoint, limit: int
    ) -> tuple[list[Event], Checkpoint]:
        while True:
            if self._generation is None:
                await self._load(conn)
            branches = " union all ".join(_BRANCH.format(table=t) for t in self.tables(after))
            rows = await conn.fetch(
                _READ.format(branches=branches),
                after.txid,
                after.position,
                limit,
                self._generation,
            )
            if rows and rows[0]["stale"]:
                self._generation = None  # the partitions changed: load them and read again
                continue
            return events_after([r for r in rows if r["txid"] is not None], after)

    async def held_back(self, conn: asyncpg.Connection, after: Checkpoint) -> bool:
        """As tail.held_back: an advisory answer (look again soon), so a stale set of
        partitions can only make the tail poll a little later."""
        seeks = " or ".join(
            f"{_HELD_BACK_BRANCH.format(table=t)} is not null" for t in self.tables(after)
        )
        return bool(await conn.fetchval(f"select {seeks}", after.txid))

    def forget(self) -> None:
        """A partition the tail named is gone (dropped): load the partitions again."""
        self._generation = None

    def tables(self, after: Checkpoint) -> list[str]:
        """The partitions that can hold events after `after`."""
        live = [KEPT, DEFAULT] + [
            f"b{bucket}"
            for bucket, sealed in self._buckets
            if sealed is None or sealed > (after.txid, after.position)
        ]
        return [partition(EVENTS, suffix) for suffix in live]

    async def _load(self, conn: asyncpg.Connection) -> None:
        rows = await conn.fetch(_PARTITIONS)
        self._generation = rows[0]["generation"]
        self._buckets = [
            (
                r["bucket"],
                None if r["sealed_txid"] is None else (r["sealed_txid"], r["sealed_position"]),
            )
            for r in rows
            if r["bucket"] is not None
        ]
