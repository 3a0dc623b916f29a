"""The watchdog: no delivery stays pending for ever (CONTRACT §15).

Whatever goes wrong — a message lost or dead-lettered, a retry timer that was never made,
a verdict the importer never gave — a delivery gets no longer than its attempts' timeouts
and scheduled retries plus GRACE: then it fails as `abandoned` (`delivery.failed`, actor
scheduler), and the dispatcher, seeing that, releases its FORBID/DELAY row and its
execution group and counts the failure for the webhook's health.

The watchdog reads every delivery stream's events from the event store in commit order
(cronhooks_common.tail's watermark: it never skips a slower transaction's event) and keeps
one row per unfinished delivery: the stream's last version and the deadline its last event
sets (`RULES`, by the event's type; any other type keeps the deadline) —

* requested, released, changes received, the importer's verdict: that event's time plus
  the attempt's timeout plus GRACE (the step under way must end within it);
* attempt failed: the retry's `retry_at` plus the timeout plus GRACE;
* queued (DELAY, an execution group): none — it waits for another delivery, which has a
  deadline of its own; its release starts its clock;
* succeeded, failed, skipped, a run's events (a run's deadline is the importer's): finished;
* overdue while it waits its turn in a dispatcher (its destination held, or a limit's
  queue): restarts at the hold's end, or now (overdue.py).

Reads come every POLL at most, so a delivery that starts and ends between two reads (nearly
all of them) never costs a row. A row past its deadline is abandoned by appending to the
delivery's stream *at the version the watchdog saw*: if anything was appended since, the
append is refused (the store's (stream, version) key) and the next read moves the row on.
So an outcome and an abandonment never both stand, and replicas never abandon twice; one
replica works at a time (the checkpoint row is taken with SKIP LOCKED), and everything a
step does commits in one transaction with its checkpoint, so a kill -9 at any instant
leaves the watchdog where its last committed step left it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import events, eventstore, pause
from cronhooks_common.clock import Clock
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import (
    Causation,
    DeliveryAttemptFailed,
    DeliveryChangesReceived,
    DeliveryFailed,
    DeliveryQueued,
    DeliveryReleased,
    DeliveryRequested,
    DeliverySkipped,
    DeliverySucceeded,
    NewEvent,
    NotesImported,
    NotesRejected,
    Payload,
)
from cronhooks_common.tail import HELD_BACK_FIRST, WATERMARK, Checkpoint, held_back
from cronhooks_scheduler import overdue, queries

log = structlog.get_logger(__name__)

GRACE = timedelta(seconds=60)
POLL = timedelta(seconds=5)  # between reads: the deadlines are a minute wide
READ = 5000  # events per read
ABANDON = 200  # deliveries abandoned per step
DEFAULT_TIMEOUT = timedelta(seconds=60)  # a delivery whose request the watchdog never read


class Then(Enum):
    """When the watchdog's next step should come."""

    AT_ONCE = "at once"  # more to read or to abandon
    SOON = "soon"  # committed events wait behind an older transaction
    LATER = "later"  # at the next POLL, the earliest deadline or a wake


AT_ONCE, SOON, LATER = Then.AT_ONCE, Then.SOON, Then.LATER

ABANDONED_TOTAL = Counter(
    "cronhooks_scheduler_deliveries_abandoned_total",
    "Deliveries the watchdog failed as abandoned (no outcome within their deadline)",
)


@dataclass(frozen=True, slots=True)
class Watch:
    """What the watchdog knows of one unfinished delivery."""

    version: int  # the last event of its stream it read
    timeout: timedelta  # of the delivery's attempts
    deadline: datetime | None  # None: waits for its turn (queued)


# How one event of the stream moves the watch: (row, the timeout, the deadline so far) ->
# the watch after it, None once the delivery has finished.
Rule = Callable[[Any, timedelta, "datetime | None"], "Watch | None"]


def _finishes(row: Any, timeout: timedelta, deadline: datetime | None) -> Watch | None:
    return None


def _starts_a_step(row: Any, timeout: timedelta, deadline: datetime | None) -> Watch | None:
    """The step under way must end within the attempt's timeout plus GRACE."""
    return Watch(row["version"], timeout, row["occurred_at"] + timeout + GRACE)


def _schedules_a_retry(row: Any, timeout: timedelta, deadline: datetime | None) -> Watch | None:
    if row["retry_at"] is not None:
        deadline = datetime.fromisoformat(row["retry_at"]) + timeout + GRACE
    return Watch(row["version"], timeout, deadline)


def _waits(row: Any, timeout: timedelta, deadline: datetime | None) -> Watch | None:
    """Queued: it waits for another delivery, which has a deadline of its own."""
    return Watch(row["version"], timeout, None)


def _keeps(row: Any, timeout: timedelta, deadline: datetime | None) -> Watch | None:
    return Watch(row["version"], timeout, deadline)


_RULES: dict[type[Payload], Rule] = {
    DeliveryRequested: _starts_a_step,
    DeliveryReleased: _starts_a_step,
    DeliveryChangesReceived: _starts_a_step,
    NotesImported: _starts_a_step,
    NotesRejected: _starts_a_step,
    DeliveryAttemptFailed: _schedules_a_retry,
    DeliveryQueued: _waits,
    DeliverySucceeded: _finishes,
    DeliveryFailed: _finishes,
    DeliverySkipped: _finishes,
}
# By event type; any other type keeps the deadline.
RULES = {cls.TYPE: rule for cls, rule in _RULES.items()}
RULES.update(dict.fromkeys((events.RunStarted.TYPE, events.RunFinished.TYPE), _finishes))


def follow(watch: Watch | None, row: Any) -> Watch | None:
    """The watch after one more event of the stream (`row`: type, version, occurred_at,
    timeout_seconds, retry_at); None once the delivery has finished. Pure."""
    timeout = watch.timeout if watch is not None else DEFAULT_TIMEOUT
    if row["timeout_seconds"] is not None:
        timeout = timedelta(seconds=int(row["timeout_seconds"]))
    deadline = watch.deadline if watch is not None else row["occurred_at"] + timeout + GRACE
    return RULES.get(row["type"], _keeps)(row, timeout, deadline)


class Watchdog:
    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        delay, patience = 0.2, HELD_BACK_FIRST
        while True:
            try:
                then = await self.step()
                delay = 0.2
            except TRANSIENT_DB_ERRORS as exc:
                log.warning("watchdog_database_error", error=repr(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if then is AT_ONCE:
                continue
            if then is SOON:
                # Usually a transaction about to end; one left open for long (a stuck
                # session, anywhere on the server) must not make us spin: back off.
                await asyncio.sleep(patience)
                patience = min(patience * 2, POLL.total_seconds())
                continue
            patience = HELD_BACK_FIRST
            self._wake.clear()
            wake_at = self._clock.now() + POLL
            earliest = await self._earliest()
            await self._clock.sleep_until(
                wake_at if earliest is None else min(wake_at, earliest), self._wake
            )

    async def _earliest(self) -> datetime | None:
        try:
            switch = await pause.current(self._pool)
            now = self._clock.now()
            if switch.active(now):
                return None  # nothing is abandoned while paused: look at the next POLL
            earliest: datetime | None = await self._pool.fetchval(
                queries.WATCH_EARLIEST, switch.ended_at(now)
            )
        except TRANSIENT_DB_ERRORS:
            return None
        return earliest

    async def step(self) -> Then:
        """Read what was committed since the last step, then abandon what is overdue, in
        one transaction; and say when the next step should come."""
        async with self._pool.acquire() as conn, conn.transaction():
            at = await conn.fetchrow(queries.TAKE_CHECKPOINT)
            if at is None:
                return LATER  # another replica's step is under way
            rows = await conn.fetch(queries.WATCH_READ.format(watermark=WATERMARK), *at, READ)
            read_to = Checkpoint(at["txid"], at["position"])
            if rows:
                await self._apply(conn, rows)
                read_to = Checkpoint(rows[-1]["txid"], rows[-1]["position"])
                await conn.execute(queries.MOVE_CHECKPOINT, read_to.txid, read_to.position)
            if len(rows) == READ:
                return AT_ONCE  # not caught up: judge nothing before the rest is read
            if await self._abandon(conn) == ABANDON:
                return AT_ONCE
            # Committed events behind an older transaction still running (the watermark
            # is the whole server's) are read when it ends: soon, not a POLL later.
            return SOON if await held_back(conn, read_to) else LATER

    async def _apply(self, conn: asyncpg.Connection, rows: list[asyncpg.Record]) -> None:
        streams = sorted({r["stream"] for r in rows})
        watches: dict[str, Watch | None] = {
            r["stream"]: Watch(r["version"], timedelta(milliseconds=r["timeout_ms"]), r["deadline"])
            for r in await conn.fetch(queries.WATCH_LOAD, streams)
        }
        for row in rows:
            watches[row["stream"]] = follow(watches.get(row["stream"]), row)
        kept = {s: w for s, w in watches.items() if w is not None}
        gone = [s for s, w in watches.items() if w is None]
        if gone:
            await conn.execute(queries.WATCH_FORGET, gone)
        if kept:
            await conn.execute(
                queries.WATCH_KEEP,
                list(kept),
                [w.version for w in kept.values()],
                [w.timeout // timedelta(milliseconds=1) for w in kept.values()],
                [w.deadline for w in kept.values()],
            )

    async def _abandon(self, conn: asyncpg.Connection) -> int:
        """Abandon what is overdue. While deliveries are paused (CONTRACT §16.4) nothing is:
        a retry held by the pause is not lost, and after the resume every delivery has its
        timeout and GRACE again from the pause's end (WATCH_OVERDUE)."""
        now = self._clock.now()
        switch = await pause.current(conn)
        if switch.active(now):
            return 0
        due = await conn.fetch(queries.WATCH_OVERDUE, now, ABANDON, switch.ended_at(now))
        if not due:
            return 0
        waits = await overdue.current(conn, now)
        for row in due:
            history = await eventstore.read_stream(conn, row["stream"])
            if not history or history[-1].version != row["version"]:
                continue  # moved on since it was read: the next read says how
            if await overdue.postponed(conn, row, history, waits, GRACE):
                continue  # it waits its turn (a hold, a limit): it must not fail
            try:
                async with conn.transaction():  # savepoint: a refused append leaves nothing
                    await eventstore.append(
                        conn,
                        row["stream"],
                        [NewEvent.of(overdue.abandonment(history))],
                        expected_version=row["version"],
                        causation=Causation.following(history[-1], actor="scheduler"),
                        occurred_at=now,
                    )
            except eventstore.ConcurrencyError:
                continue  # an outcome got there first: it stands
            await conn.execute(queries.WATCH_FORGET, [row["stream"]])
            ABANDONED_TOTAL.inc()
            log.warning(
                "delivery_abandoned",
                stream=row["stream"],
                version=row["version"],
                deadline=row["deadline"].isoformat(),
            )
        return len(due)
