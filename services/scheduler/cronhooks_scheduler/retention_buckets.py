"""The delivery buckets as the retention job (retention.py) sees them: their rows in
`eventstore.buckets`, the id sequence, and what holds a bucket back.

A bucket is a range of delivery ids that took ids from when it opened until its successor
opened (buckets.py routes reads to its partitions).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from cronhooks_common.buckets import partition
from cronhooks_common.events import (
    DeliveryFailed,
    DeliverySkipped,
    DeliverySucceeded,
    RunFinished,
)
from cronhooks_scheduler import bucket_ddl, queries

SPAN = timedelta(days=1)  # a bucket's time of filling
MIN_WIDTH = 100_000  # ids in a bucket, at least (a herd of 10,000 between two steps fits)
HEADROOM = 1.5  # a spare holds this many times the ids the open bucket used per SPAN
JUMP_MARGIN = 100  # the sequence is moved only when this far below the next bucket
# The final outcomes of a delivery: after one, nothing is appended to its stream. A 202
# that started a run (CONTRACT §16.2) is followed by run.started, then run.finished: a
# delivery whose stream ends in run.started is still running and holds its bucket (the
# run's report, or its deadline, appends to the stream).
FINAL = tuple(cls.TYPE for cls in (DeliverySucceeded, DeliveryFailed, DeliverySkipped, RunFinished))


@dataclass(frozen=True, slots=True)
class Bucket:
    bucket: int
    lo: int
    hi: int
    opened_at: datetime | None  # None: a spare, no id minted in it yet
    sealed: tuple[int, int] | None = None  # its last event (txid, position), once sealed
    logs_dropped: bool = False

    @property
    def events(self) -> str:
        """Its partition of the event store."""
        return partition(bucket_ddl.EVENTS, f"b{self.bucket}")


def spare_width(open_: Bucket, next_id: int, now: datetime) -> int:
    """Ids for the next bucket: HEADROOM × what the open bucket used per SPAN so far
    (counted over an hour at least, so a young bucket does not extrapolate a burst)."""
    assert open_.opened_at is not None
    used = max(next_id - open_.lo, 0)
    elapsed = max(now - open_.opened_at, timedelta(hours=1))
    return max(MIN_WIDTH, math.ceil(HEADROOM * used * (SPAN / elapsed)))


def open_bucket(buckets: list[Bucket], next_id: int) -> Bucket:
    """The bucket the next id is minted in: the last opened one, or the spare the ids have
    run into since (a busier day than the spare's size foresaw)."""
    opened = [b for b in buckets if b.opened_at is not None]
    current = max(opened, key=lambda b: b.lo)
    return next((b for b in buckets if b.lo <= next_id < b.hi), current)


def closed(buckets: list[Bucket], since: datetime) -> list[Bucket]:
    """The buckets whose successor opened before `since`, oldest first. A bucket
    took ids until its successor opened; an id minted just before may still be on its way
    to the store, hence the margin the caller puts in `since`."""
    ordered = sorted(buckets, key=lambda b: b.lo)
    out = []
    for b, successor in itertools.pairwise(ordered):
        if successor.opened_at is None or successor.opened_at >= since:
            break
        out.append(b)
    return out


async def buckets(conn: asyncpg.Connection) -> list[Bucket]:
    return [
        Bucket(
            r["bucket"],
            r["lo"],
            r["hi"],
            r["opened_at"],
            None if r["sealed_txid"] is None else (r["sealed_txid"], r["sealed_position"]),
            r["logs_dropped"],
        )
        for r in await conn.fetch(queries.BUCKETS)
    ]


async def next_id(conn: asyncpg.Connection) -> int:
    """The id the sequence hands out next."""
    row = await conn.fetchrow(queries.NEXT_ID)
    return int(row["last_value"]) + 1 if row["is_called"] else int(row["last_value"])


async def mark_open(conn: asyncpg.Connection, bucket: int, now: datetime) -> None:
    await conn.execute(queries.MARK_OPEN, bucket, now)


async def jump(conn: asyncpg.Connection, lo: int) -> bool:
    """Move the id sequence so that the next id is `lo`, the bucket's first.

    setval is not transactional and a writer may take an id at the same instant: the
    statement moves the sequence only while it is JUMP_MARGIN below the target, within one
    statement, so no id already handed out can be handed out again."""
    moved = await conn.fetchval(queries.JUMP, lo, JUMP_MARGIN)
    return moved is not None


async def last_event_at(conn: asyncpg.Connection, b: Bucket) -> datetime | None:
    """When the bucket's last event happened (None: it has none)."""
    at: datetime | None = await conn.fetchval(queries.LAST_EVENT.format(events=b.events))
    return at


async def unfinished(conn: asyncpg.Connection, b: Bucket) -> tuple[int, str | None]:
    """How many deliveries of the bucket have no final outcome yet, and one of them."""
    row = await conn.fetchrow(queries.UNFINISHED.format(events=b.events), list(FINAL))
    return int(row["n"]), row["example"]


async def readers_behind(conn: asyncpg.Connection, last: tuple[int, int]) -> list[str]:
    """The registered tail readers whose checkpoint has not passed `last`, a sealed
    bucket's last event in (txid, position) order."""
    behind = []
    for reader in await conn.fetch(queries.BUCKET_READERS):
        at = await conn.fetchrow(reader["checkpoint"])
        if at is None or (at["txid"], at["position"]) < last:
            behind.append(reader["name"])
    return behind
