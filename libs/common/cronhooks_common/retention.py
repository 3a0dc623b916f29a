"""Retention (CONTRACT §12): delivery buckets are opened ahead of the ids and dropped whole.

A bucket is a range of delivery ids, about a day of them (buckets.py routes reads to its
partitions). The job, run by the scheduler under an advisory lock (one replica at a time),
each step:

- **opens**: once the open bucket is a day old, moves the delivery-id sequence to the
  next bucket (ids skip the rest of the old range: ids are unique, never contiguous), and
  keeps one spare bucket ahead, sized from the ids the last day used, so ids never run
  beyond every bucket (they would land in the default partition, which is never dropped);
- **seals** a closed bucket once every delivery in it has finished: its events partition
  then refuses inserts, and the admin-api projector's tail stops reading it once past its
  last event (tail.py `LiveTail`), so the tail reads the few live partitions, not all;
- **drops attempt logs** (request and response bodies) of sealed buckets closed more than
  `CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS` ago: their partitions of the tables registered in
  `eventstore.attempt_log_tables`; the attempts stay (`logsExpired`);
- **keeps days** of the tables partitioned by day (`day_partitions.py`: slot and change
  requests), dropping those older than the delivery retention, and forgets the daily
  budget's counts (`budget.forget_before`) as old;
- **drops** a bucket whose last event is older than `CRONHOOKS_DELIVERY_RETENTION_DAYS`,
  unless a delivery in it has not finished (it is not sealed) or a registered tail reader
  (`eventstore.bucket_readers`) has not read past its last event: then the bucket is held
  and the log says why (`retention_bucket_held`).

Ages come from the events' `occurred_at` (the writers' clock) and the job's clock, so
tests move time with a ManualClock.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
import structlog

from cronhooks_common import bucket_ddl, budget, day_partitions
from cronhooks_common.buckets import partition
from cronhooks_common.clock import Clock
from cronhooks_common.db import TRANSIENT_DB_ERRORS

log = structlog.get_logger(__name__)

RETENTION_LOCK = 0x63726F6E_72657465  # "cronrete"
SPAN = timedelta(days=1)  # a bucket's time of filling
MIN_WIDTH = 100_000  # ids in a bucket, at least (a herd of 10,000 between two steps fits)
HEADROOM = 1.5  # a spare holds this many times the ids the open bucket used per SPAN
JUMP_MARGIN = 100  # the sequence is moved only when this far below the next bucket
EVERY = timedelta(minutes=5)  # how often the job looks
SEAL_GRACE = timedelta(minutes=10)  # after a bucket closes, ids minted just before are written
# The final outcomes of a delivery: after one, nothing is appended to its stream.
FINAL = ("delivery.succeeded", "delivery.failed", "delivery.skipped")


@dataclass(frozen=True, slots=True)
class Bucket:
    bucket: int
    lo: int
    hi: int
    opened_at: datetime | None  # None: a spare, no id minted in it yet
    sealed: tuple[int, int] | None = None  # its last event (txid, position), once sealed
    logs_dropped: bool = False


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


class RetentionJob:
    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        clock: Clock,
        delivery_retention_days: int,
        attempt_log_retention_days: int = 0,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._retention = (
            timedelta(days=delivery_retention_days) if delivery_retention_days else None
        )
        self._log_retention = (
            timedelta(days=attempt_log_retention_days) if attempt_log_retention_days else None
        )
        self._retention_days = delivery_retention_days
        self._wake = asyncio.Event()

    async def run(self) -> None:
        """Step every EVERY of the clock, for ever; a database that is gone is waited for."""
        while True:
            try:
                await self.step()
            except TRANSIENT_DB_ERRORS as exc:
                log.warning("retention_database_unavailable", error=repr(exc))
            except asyncpg.LockNotAvailableError:
                log.info("retention_busy")  # a lock not had within lock_timeout: next step
            except Exception:
                log.exception("retention_failed")
            await self._clock.sleep_until(self._clock.now() + EVERY, self._wake)

    def poke(self) -> None:
        """Step now (tests, after moving the clock)."""
        self._wake.set()

    async def step(self) -> list[int]:
        """Open and drop what is due; the buckets dropped."""
        self._wake.clear()
        now = self._clock.now()
        async with self._pool.acquire() as conn:
            # A session lock, as partitions are created and dropped in several transactions.
            if not await conn.fetchval("select pg_try_advisory_lock($1)", RETENTION_LOCK):
                return []
            try:
                await self._open(conn, now)
                await self._seal(conn, now)
                if self._log_retention:
                    await self._drop_logs(conn, now - self._log_retention)
                dropped = await self._drop(conn, now) if self._retention else []
                async with conn.transaction():
                    await conn.execute("set local lock_timeout = '500ms'")
                    await day_partitions.keep_days(conn, now, self._retention_days)
                if self._retention:  # the budget's counts (a day of slack for every zone)
                    await budget.forget_before(conn, (now - self._retention - SPAN).date())
                return dropped
            finally:
                await conn.execute("select pg_advisory_unlock($1)", RETENTION_LOCK)

    async def _open(self, conn: asyncpg.Connection, now: datetime) -> None:
        async with conn.transaction():
            # Creating partitions locks every bucketed table: rather give up and try at the
            # next step than stall (or deadlock with) a writer holding one of them.
            await conn.execute("set local lock_timeout = '500ms'")
            buckets = await _buckets(conn)
            next_id = await _next_id(conn)
            current = open_bucket(buckets, next_id)
            if current.opened_at is None:  # the ids ran into the spare
                await _mark_open(conn, current.bucket, now)
                current = Bucket(current.bucket, current.lo, current.hi, now)
            spares = [b for b in buckets if b.lo >= current.hi]
            # Room ahead for a day and a half of ids at the open bucket's pace (a herd
            # between two steps included): ids beyond every bucket would land in the
            # default partitions, which are never dropped.
            room = current.hi - next_id + sum(b.hi - b.lo for b in spares)
            width = spare_width(current, next_id, now)
            if not spares or room < width:
                last = max(buckets, key=lambda b: b.hi)
                number = max(b.bucket for b in buckets) + 1
                lo = max(last.hi, await bucket_ddl.beyond_defaults(conn))
                await bucket_ddl.create_bucket(conn, number, lo, lo + width)
                log.info("retention_bucket_created", bucket=number, lo=lo, width=width)
                spares.append(Bucket(number, lo, lo + width, None))
            spare = min(spares, key=lambda b: b.lo)
            assert current.opened_at is not None
            if now - current.opened_at >= SPAN and await _jump(conn, spare.lo):
                await _mark_open(conn, spare.bucket, now)
                log.info("retention_bucket_opened", bucket=spare.bucket, closed=current.bucket)

    async def _seal(self, conn: asyncpg.Connection, now: datetime) -> None:
        for b in _closed(await _buckets(conn), now - SEAL_GRACE):
            if b.sealed is None and not (await _unfinished(conn, b))[0]:
                async with conn.transaction():
                    # Short waits for locks: better to try again next step than to queue
                    # readers and writers behind a waiting ALTER or DROP.
                    await conn.execute("set local lock_timeout = '500ms'")
                    await bucket_ddl.seal_bucket(conn, b.bucket)
                log.info("retention_bucket_sealed", bucket=b.bucket)

    async def _drop_logs(self, conn: asyncpg.Connection, before: datetime) -> None:
        """The attempt logs of sealed buckets closed before `before` (an unfinished
        delivery keeps its bucket's logs: its next attempt's log has a place to go)."""
        for b in _closed(await _buckets(conn), before):
            if b.sealed is not None and not b.logs_dropped:
                async with conn.transaction():
                    await conn.execute("set local lock_timeout = '500ms'")
                    await bucket_ddl.drop_attempt_logs(conn, b.bucket)
                log.info("retention_attempt_logs_dropped", bucket=b.bucket)

    async def _drop(self, conn: asyncpg.Connection, now: datetime) -> list[int]:
        assert self._retention is not None
        before = now - self._retention
        dropped = []
        for b in _closed(await _buckets(conn), before):
            if await self._droppable(conn, b, before):
                async with conn.transaction():
                    await conn.execute("set local lock_timeout = '500ms'")
                    await bucket_ddl.drop_bucket(conn, b.bucket, b.lo, b.hi)
                log.info("retention_bucket_dropped", bucket=b.bucket, lo=b.lo, hi=b.hi)
                dropped.append(b.bucket)
        return dropped

    async def _droppable(self, conn: asyncpg.Connection, b: Bucket, before: datetime) -> bool:
        events = partition(bucket_ddl.EVENTS, f"b{b.bucket}")
        last = await conn.fetchrow(
            f"select occurred_at from {events} order by position desc limit 1"
        )
        if last is not None and last["occurred_at"] >= before:
            return False  # not old enough: nothing to say
        if b.sealed is None:
            # A delivery still retrying, queued or waiting for the importer keeps the
            # whole bucket (a seal needs every one finished).
            count, example = await _unfinished(conn, b)
            log.warning(
                "retention_bucket_held",
                bucket=b.bucket,
                reason="unfinished_deliveries",
                deliveries=count,
                example=example,
            )
            return False
        behind = await _readers_behind(conn, b.sealed)
        if behind:
            log.warning(
                "retention_bucket_held", bucket=b.bucket, reason="not_yet_read", readers=behind
            )
            return False
        return True


def _closed(buckets: list[Bucket], since: datetime) -> list[Bucket]:
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


async def _unfinished(conn: asyncpg.Connection, b: Bucket) -> tuple[int, str | None]:
    """How many deliveries of the bucket have no final outcome yet, and one of them."""
    row = await conn.fetchrow(
        f"""
        select count(*) as n, min(stream) as example from (
            select distinct on (stream) stream, type
            from {partition(bucket_ddl.EVENTS, f"b{b.bucket}")}
            order by stream, version desc
        ) s where type <> all($1::text[])
        """,
        list(FINAL),
    )
    return int(row["n"]), row["example"]


async def _buckets(conn: asyncpg.Connection) -> list[Bucket]:
    rows = await conn.fetch(
        "select bucket, lo, hi, opened_at, sealed_txid, sealed_position,"
        " logs_dropped_at is not null as logs_dropped from eventstore.buckets"
    )
    return [
        Bucket(
            r["bucket"],
            r["lo"],
            r["hi"],
            r["opened_at"],
            None if r["sealed_txid"] is None else (r["sealed_txid"], r["sealed_position"]),
            r["logs_dropped"],
        )
        for r in rows
    ]


async def _next_id(conn: asyncpg.Connection) -> int:
    """The id the sequence hands out next."""
    row = await conn.fetchrow("select last_value, is_called from eventstore.delivery_ids")
    return int(row["last_value"]) + 1 if row["is_called"] else int(row["last_value"])


async def _mark_open(conn: asyncpg.Connection, bucket: int, now: datetime) -> None:
    await conn.execute(
        "update eventstore.buckets set opened_at = $2 where bucket = $1", bucket, now
    )


async def _jump(conn: asyncpg.Connection, lo: int) -> bool:
    """Move the id sequence so that the next id is `lo`, the bucket's first.

    setval is not transactional and a writer may take an id at the same instant: the
    statement moves the sequence only while it is JUMP_MARGIN below the target, within one
    statement, so no id already handed out can be handed out again."""
    moved = await conn.fetchval(
        "select setval('eventstore.delivery_ids', $1, false) from eventstore.delivery_ids"
        " where last_value < $1 - $2",
        lo,
        JUMP_MARGIN,
    )
    return moved is not None


async def _readers_behind(conn: asyncpg.Connection, last: tuple[int, int]) -> list[str]:
    """The registered tail readers whose checkpoint has not passed `last`, a sealed
    bucket's last event in (txid, position) order."""
    behind = []
    readers = "select name, checkpoint from eventstore.bucket_readers order by name"
    for reader in await conn.fetch(readers):
        at = await conn.fetchrow(reader["checkpoint"])
        if at is None or (at["txid"], at["position"]) < last:
            behind.append(reader["name"])
    return behind
