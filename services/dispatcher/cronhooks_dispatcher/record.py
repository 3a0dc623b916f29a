"""Step 5, record: what attempts led to, many at a time (outcome.py words each `Record`).

Every record has the same shape: claim the event that caused it in the inbox, append one
event after it on its stream, maybe keep the attempt while it waits for the importer's
verdict (or forget it when that verdict is the cause), and for a finished delivery
release its lanes and hand them on (handon.py) and count its webhook's health
(health.py, which may raise or resolve an alert in the same transaction).
`RecordWriter` gathers the records that arrive while a batch is being written and writes
the next batch with one statement per kind (unnest) in one transaction, so a burst of
thousands of deliveries costs a few dozen round trips, not thousands. Callers wait for the
commit of their record before acking their message.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.consumer import claim_events
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import Causation, Event, NewEvent, RequestFields
from cronhooks_dispatcher import handon, health, queries
from cronhooks_dispatcher.alerts import AlertPolicy
from cronhooks_dispatcher.health import Health

log = structlog.get_logger(__name__)

MAX_BATCH = 500


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one HTTP attempt sent and got."""

    request: RequestFields  # a request, or a release (which names the group it holds)
    started_at: datetime
    request_body: str  # as sent, api_token redacted, cut at 64 KiB
    response_status: int | None
    response_body: str | None
    duration_ms: int
    request_body_truncated: bool = False


@dataclass(frozen=True, slots=True)
class Record:
    cause: Event  # the event this record answers: claimed in the inbox, followed on its stream
    event: NewEvent
    attempt: Attempt | None = None
    waits: bool = False  # the attempt waits for the importer's verdict: keep it
    answers_wait: bool = False  # the cause is that verdict: the kept attempt goes
    release: tuple[int, int] | None = None  # (webhook_id, delivery_id) of a finished delivery
    group_release: bool = False  # ...that may hold an execution group's lane
    health: Health | None = None

    @property
    def causation(self) -> Causation:
        return Causation.following(self.cause, actor="dispatcher")


Pending = tuple[Record, asyncio.Future[bool]]


class RecordWriter:
    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        *,
        auto_disable_after: int,
        alerts: AlertPolicy | None = None,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self.health = health.Rules(auto_disable_after, alerts or AlertPolicy())
        self._queue: asyncio.Queue[Pending] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    @property
    def alerts(self) -> AlertPolicy:
        return self.health.alerts

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def write(self, record: Record) -> bool:
        """Write `record`; False if its cause had been handled before (nothing written)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        await self._queue.put((record, future))
        return await future

    async def _loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                results = await self._write([record for record, _ in batch])
            except TRANSIENT_DB_ERRORS as exc:  # every record is retried by its caller
                _settle(batch, exc)
                continue
            except Exception as exc:
                if len(batch) == 1:
                    _settle(batch, exc)
                    continue
                # One record the database refuses must not fail the others with it:
                # each alone, so only its own caller hears of it.
                log.warning("record_batch_refused", size=len(batch), error=repr(exc))
                for item in batch:
                    try:
                        _settle([item], (await self._write([item[0]]))[0])
                    except Exception as one:
                        _settle([item], one)
                continue
            for (_, future), written in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(written)

    async def _write(self, records: list[Record]) -> list[bool]:
        now = self._clock.now()
        async with self._pool.acquire() as conn, conn.transaction():
            claimed = await claim_events(conn, queries.INBOX, [r.cause for r in records])
            # A cause claimed in this batch counts once, for its first record.
            fresh: list[Record] = []
            for record in records:
                if record.cause.event_id in claimed:
                    claimed.discard(record.cause.event_id)
                    fresh.append(record)
            moved = await _append(conn, fresh, now)
            # A cause someone else already followed on its stream (the watchdog abandoned
            # the delivery meanwhile): its outcome was not recorded, so it keeps, releases
            # and counts nothing.
            fresh = [r for r in fresh if r.cause.stream not in moved]
            await _keep_waiting(conn, fresh)
            finished = [r for r in fresh if r.release is not None]
            # FORBID/DELAY rows and group lanes go, and go on to the next waiter.
            await handon.release(
                conn,
                [r.release for r in finished if r.release is not None],
                [r.release[1] for r in finished if r.release is not None and r.group_release],
                now,
            )
            counted = [(r.health, r.causation) for r in fresh if r.health is not None]
            alerts = await self.health.count(conn, counted, now)
        self.alerts.committed(alerts)
        written = {id(r) for r in fresh}
        return [id(r) in written for r in records]


async def _append(conn: asyncpg.Connection, records: list[Record], now: datetime) -> set[str]:
    """Append each record's event after its cause; the streams that had moved on."""
    appends = [(r.cause.stream, r.cause.version, r.event, r.causation) for r in records]
    moved: set[str] = set()
    while appends:
        try:
            async with conn.transaction():  # savepoint: a conflict leaves nothing behind
                await eventstore.append_many(conn, appends, occurred_at=now)
            return moved
        except eventstore.ConcurrencyError as exc:
            # Someone else already followed that cause on its stream: theirs stands.
            log.warning("outcome_stream_moved", stream=exc.stream)
            moved.add(exc.stream)
            appends = [a for a in appends if a[0] != exc.stream]
    return moved


async def _keep_waiting(conn: asyncpg.Connection, records: list[Record]) -> None:
    """Keep an attempt only while it waits for the importer's verdict on its changes: that
    is all dispatcher.attempts is read for. Every finished attempt lives in its outcome
    event (and admin-api's attempt log, projected from it)."""
    waiting = [r.attempt for r in records if r.waits and r.attempt is not None]
    if waiting:
        await conn.execute(
            queries.KEEP_WAITING,
            [a.request.delivery_id for a in waiting],
            [a.request.attempt for a in waiting],
            [a.request.webhook_id for a in waiting],
            [a.started_at for a in waiting],
            [a.duration_ms for a in waiting],
            [a.request_body for a in waiting],
            [a.response_status for a in waiting],
            [a.response_body for a in waiting],
            [a.request.to_data() for a in waiting],
            [a.request_body_truncated for a in waiting],
        )
    answered = [r.attempt for r in records if r.answers_wait and r.attempt is not None]
    if answered:  # the importer answered: the attempt no longer waits
        await conn.execute(
            queries.FORGET_WAITING,
            [a.request.delivery_id for a in answered],
            [a.request.attempt for a in answered],
        )


def _settle(batch: list[Pending], result: bool | BaseException) -> None:
    for _, future in batch:
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
