"""Retention (CONTRACT §12): delivery buckets are opened ahead of the ids and dropped whole.

A bucket is a range of delivery ids, about a day of them (cronhooks_common.buckets routes
reads to its partitions; retention_buckets.py holds what the job knows of them). The job,
run by the scheduler under an advisory lock (one replica at a time), each step:

- **opens**: once the open bucket is a day old, moves the delivery-id sequence to the
  next bucket (ids skip the rest of the old range: ids are unique, never contiguous), and
  keeps one spare bucket ahead, sized from the ids the last day used, so ids never run
  beyond every bucket (they would land in the default partition, which is never dropped);
- **seals** a closed bucket once every delivery in it has finished: its events partition
  then refuses inserts, and the admin-api projector's tail stops reading it once past its
  last event (cronhooks_common.live_tail), so the tail reads the few live partitions, not all;
- **drops attempt logs** (request and response bodies) of sealed buckets closed more than
  `CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS` ago: their partitions of the tables registered in
  `eventstore.attempt_log_tables`; the attempts stay (`logsExpired`);
- **keeps days** of the tables partitioned by day (`day_partitions.py`: slot and change
  requests), dropping those older than the delivery retention, and forgets the daily
  budget's counts (`cronhooks_common.budget.forget_before`) as old;
- **drops** a bucket whose last event is older than `CRONHOOKS_DELIVERY_RETENTION_DAYS`,
  unless a delivery in it has not finished (it is not sealed) or a registered tail reader
  (`eventstore.bucket_readers`) has not read past its last event: then the bucket is held
  and the log says why (`retention_bucket_held`);
- **forgets expired previous secrets** (CONTRACT §17): a rotation with `graceSeconds` keeps
  the previous secret and private key sealed in `shared.webhook_secrets` until
  `previous_expires_at`; after it they are cleared here. Not for correctness — the
  dispatcher compares the expiry with its clock at each signature and never signs with
  an expired one, even from a warm cache — but so that no old secret outlives its grace
  at rest by more than a step (and the next rotation replaces it anyway).

Ages come from the events' `occurred_at` (the writers' clock) and the job's clock, so
tests move time with a ManualClock.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import asyncpg
import structlog

from cronhooks_common import budget
from cronhooks_common.clock import Clock
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_scheduler import bucket_ddl, day_partitions, queries
from cronhooks_scheduler.retention_buckets import (
    SPAN,
    Bucket,
    buckets,
    closed,
    jump,
    last_event_at,
    mark_open,
    next_id,
    open_bucket,
    readers_behind,
    spare_width,
    unfinished,
)

log = structlog.get_logger(__name__)

RETENTION_LOCK = 0x63726F6E_72657465  # "cronrete"
EVERY = timedelta(minutes=5)  # how often the job looks
BUSY_RETRY_SECONDS = 1.0  # after a lock it could not have
SEAL_GRACE = timedelta(minutes=10)  # after a bucket closes, ids minted just before are written


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
                # A lock not had within lock_timeout (a reader held a partition's parent):
                # try again soon, not a whole EVERY later (a poke would be lost with it).
                log.info("retention_busy")
                await asyncio.sleep(BUSY_RETRY_SECONDS)
                continue
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
            if not await conn.fetchval(queries.TRY_RETENTION_LOCK, RETENTION_LOCK):
                return []
            try:
                await self._open(conn, now)
                await self._seal(conn, now)
                if self._log_retention:
                    await self._drop_logs(conn, now - self._log_retention)
                dropped = await self._drop(conn, now) if self._retention else []
                async with conn.transaction():
                    await conn.execute(queries.SHORT_LOCK_WAIT)
                    await day_partitions.keep_days(conn, now, self._retention_days)
                await conn.execute(queries.FORGET_EXPIRED_SECRETS, now)
                if self._retention:  # the budget's counts (a day of slack for every zone)
                    await budget.forget_before(conn, (now - self._retention - SPAN).date())
                return dropped
            finally:
                await conn.execute(queries.RETENTION_UNLOCK, RETENTION_LOCK)

    async def _open(self, conn: asyncpg.Connection, now: datetime) -> None:
        async with conn.transaction():
            # Creating partitions locks every bucketed table: rather give up and try at the
            # next step than stall (or deadlock with) a writer holding one of them.
            await conn.execute(queries.SHORT_LOCK_WAIT)
            known = await buckets(conn)
            next_ = await next_id(conn)
            current = open_bucket(known, next_)
            if current.opened_at is None:  # the ids ran into the spare
                await mark_open(conn, current.bucket, now)
                current = Bucket(current.bucket, current.lo, current.hi, now)
            spares = [b for b in known if b.lo >= current.hi]
            # Room ahead for a day and a half of ids at the open bucket's pace (a herd
            # between two steps included): ids beyond every bucket would land in the
            # default partitions, which are never dropped.
            room = current.hi - next_ + sum(b.hi - b.lo for b in spares)
            width = spare_width(current, next_, now)
            if not spares or room < width:
                last = max(known, key=lambda b: b.hi)
                number = max(b.bucket for b in known) + 1
                lo = max(last.hi, await bucket_ddl.beyond_defaults(conn))
                await bucket_ddl.create_bucket(conn, number, lo, lo + width)
                log.info("retention_bucket_created", bucket=number, lo=lo, width=width)
                spares.append(Bucket(number, lo, lo + width, None))
            spare = min(spares, key=lambda b: b.lo)
            assert current.opened_at is not None
            if now - current.opened_at >= SPAN and await jump(conn, spare.lo):
                await mark_open(conn, spare.bucket, now)
                log.info("retention_bucket_opened", bucket=spare.bucket, closed=current.bucket)

    async def _seal(self, conn: asyncpg.Connection, now: datetime) -> None:
        for b in closed(await buckets(conn), now - SEAL_GRACE):
            if b.sealed is None and not (await unfinished(conn, b))[0]:
                async with conn.transaction():
                    # Short waits for locks: better to try again next step than to queue
                    # readers and writers behind a waiting ALTER or DROP.
                    await conn.execute(queries.SHORT_LOCK_WAIT)
                    await bucket_ddl.seal_bucket(conn, b.bucket)
                log.info("retention_bucket_sealed", bucket=b.bucket)

    async def _drop_logs(self, conn: asyncpg.Connection, before: datetime) -> None:
        """The attempt logs of sealed buckets closed before `before` (an unfinished
        delivery keeps its bucket's logs: its next attempt's log has a place to go)."""
        for b in closed(await buckets(conn), before):
            if b.sealed is not None and not b.logs_dropped:
                async with conn.transaction():
                    await conn.execute(queries.SHORT_LOCK_WAIT)
                    await bucket_ddl.drop_attempt_logs(conn, b.bucket)
                log.info("retention_attempt_logs_dropped", bucket=b.bucket)

    async def _drop(self, conn: asyncpg.Connection, now: datetime) -> list[int]:
        assert self._retention is not None
        before = now - self._retention
        dropped = []
        for b in closed(await buckets(conn), before):
            if await self._droppable(conn, b, before):
                async with conn.transaction():
                    await conn.execute(queries.SHORT_LOCK_WAIT)
                    await bucket_ddl.drop_bucket(conn, b.bucket, b.lo, b.hi)
                log.info("retention_bucket_dropped", bucket=b.bucket, lo=b.lo, hi=b.hi)
                dropped.append(b.bucket)
        return dropped

    async def _droppable(self, conn: asyncpg.Connection, b: Bucket, before: datetime) -> bool:
        last = await last_event_at(conn, b)
        if last is not None and last >= before:
            return False  # not old enough: nothing to say
        if b.sealed is None:
            # A delivery still retrying, queued or waiting for the importer keeps the
            # whole bucket (a seal needs every one finished).
            count, example = await unfinished(conn, b)
            log.warning(
                "retention_bucket_held",
                bucket=b.bucket,
                reason="unfinished_deliveries",
                deliveries=count,
                example=example,
            )
            return False
        behind = await readers_behind(conn, b.sealed)
        if behind:
            log.warning(
                "retention_bucket_held", bucket=b.bucket, reason="not_yet_read", readers=behind
            )
            return False
        return True
