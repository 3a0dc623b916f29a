"""Step 5, record: what an attempt led to, worded as the event that follows its cause on
the delivery's stream (CONTRACT §4, §6) — `delivery.succeeded`; for an answer with note
changes `delivery.changes_received` (the attempt waits for the importer's verdict, kept by
waiting.py, finished by finish.py); `delivery.attempt_failed` with `retry_at` (a retry
timer of the scheduler's) while attempts are left, else `delivery.failed` — and written.

The wording is pure; the handlers decide. `RecordWriter` writes what arrives while a batch
is being written as the next batch, one statement per kind in one transaction: claim each
cause in the inbox, append each event, keep or forget waiting attempts, release a finished
delivery's lanes and hand them on (handon.py), count its webhook's health (health.py: it may
raise or resolve an alert), add up its costs (spending.py). A burst costs a few dozen round
trips; callers await the commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.agent_report import NOTHING, event_fields
from cronhooks_common.clock import Clock, iso
from cronhooks_common.consumer import claim_events
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import (
    UNSET,
    Causation,
    DeliveryAttemptFailed,
    DeliveryChangesReceived,
    DeliveryFailed,
    DeliveryOutcome,
    DeliverySucceeded,
    Event,
    NewEvent,
    storable,
)
from cronhooks_common.faults import internal_error
from cronhooks_dispatcher import deadline, handon, health, queries, runs, spending, waiting
from cronhooks_dispatcher.alerts import AlertPolicy
from cronhooks_dispatcher.attempt import Attempt
from cronhooks_dispatcher.health import Health
from cronhooks_dispatcher.outcome import Outcome

log = structlog.get_logger(__name__)

MAX_BATCH = 500
DELIVERIES = Counter("cronhooks_dispatcher_deliveries_total", "Finished deliveries", ["outcome"])


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    cause: Event  # the event this record answers: claimed in the inbox, followed on its stream
    event: NewEvent
    attempt: Attempt | None = None
    waits: bool = False  # the attempt waits for the importer's verdict: keep it
    answers_wait: bool = False  # the cause is that verdict: the kept attempt goes
    release: tuple[int, int] | None = None  # (webhook_id, delivery_id) of a finished delivery
    group_release: bool = False  # ...that may hold an execution group's lane
    health: Health | None = None
    # what follows `event` on its stream in the same append: a 202 to a request with a
    # token starts a run (runs.py); its delivery keeps its lanes and is not counted yet
    then: NewEvent | None = None

    @property
    def causation(self) -> Causation:
        return Causation.following(self.cause, actor="dispatcher")


def changes_received(cause: Event, attempt: Attempt, changes: list[Any]) -> Record:
    """An answer with note changes: the attempt waits for the importer's verdict."""
    request = attempt.request
    event = DeliveryChangesReceived(
        **request.fields(),
        changes=changes,
        write_patterns=request.target.write_patterns,
        max_depth=request.target.max_depth,
        # one deeper than what it answers (§4, §11: a cron slot is 0, a change its batch's)
        depth=(request.depth or 0) + 1,
        trace=request.trace,  # its writes continue its chain (§16.3); absent: a root
    )
    return Record(cause, NewEvent.of(event), attempt, waits=True)


def finished(
    cause: Event,
    attempt: Attempt,
    outcome: Outcome,
    retry_at: datetime,
    *,
    final: bool = False,
    answers_wait: bool = False,
) -> Record:
    """The record of a finished attempt, after `cause` (the request, or the importer's
    verdict) on its stream. `final`: no retry, whatever attempts are left."""
    request = attempt.request
    number = request.attempt
    final = final or outcome.succeeded or outcome.gone or number > request.target.max_retries
    more: dict[str, Any] = {}
    if not final and deadline.too_late(request, retry_at):  # §17: the delivery ends now
        outcome, more["attempt_error"] = deadline.ended(outcome)
        final = True
    event: DeliveryOutcome
    if outcome.succeeded or final:
        cls = DeliverySucceeded if outcome.succeeded else DeliveryFailed
        event = _worded(cls, attempt, outcome, **more)
    else:
        # the retry counts its deadline from the same request time (deadline.py)
        next_try = {"retry_at": iso(retry_at), "next_attempt": number + 1}
        next_try["requested_at"] = request.requested_at
        event = _worded(DeliveryAttemptFailed, attempt, outcome, **next_try)
    if final:
        DELIVERIES.labels(event.status).inc()
    log.info(
        "delivery_attempted",
        attempt=number,
        status=event.status,
        final=final,
        response_status=attempt.response_status,
        duration_ms=attempt.duration_ms,
        error=outcome.error,
    )
    if not final:
        return Record(cause, NewEvent.of(event), attempt, answers_wait=answers_wait)
    ok, gone = outcome.succeeded, outcome.gone
    counted = Health(request.webhook_id, ok, gone, outcome.error, request.kind)
    return Record(
        cause,
        NewEvent.of(event),
        attempt,
        answers_wait=answers_wait,
        release=(request.webhook_id, request.delivery_id),
        group_release=handon.may_hold_group(request),
        health=counted,
    )


Worded = TypeVar("Worded", bound=DeliveryOutcome)


def _worded(cls: type[Worded], attempt: Attempt, outcome: Outcome, **more: Any) -> Worded:
    return cls(
        **attempt.request.fields(),
        status="success" if outcome.succeeded else "failed",
        response_status=attempt.response_status,
        duration_ms=attempt.duration_ms,
        error=outcome.error,
        started_at=iso(attempt.started_at),
        request_body=attempt.request_body,
        request_body_truncated=True if attempt.request_body_truncated else UNSET,  # when cut
        response_body=attempt.response_body,
        **event_fields(attempt.report),
        **more,
    )


def failed_by_fault(
    cause: Event,
    attempt: Attempt,
    error: Exception,
    retry_at: datetime,
    *,
    final: bool = False,
    answers_wait: bool = False,
) -> Record:
    """A failed attempt saying `internal error: …` (retried as usual unless `final`); of
    what came back only the status is kept."""
    body = storable(attempt.request_body)
    bare = dataclasses.replace(attempt, request_body=body, response_body=None, report=NOTHING)
    outcome = Outcome(False, internal_error(error))
    return finished(cause, bare, outcome, retry_at, final=final, answers_wait=answers_wait)


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
        self.alerts = self.health.alerts
        self._queue: asyncio.Queue[Pending] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

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
            await runs.insert(conn, fresh)  # the runs 202 answers started (§16.2)
            await spending.count(conn, fresh, now)  # what the answers cost, by day (§16.4)
            # An attempt that waits for the importer's verdict is kept until it comes.
            await waiting.keep(conn, [r.attempt for r in fresh if r.waits and r.attempt])
            await waiting.forget(conn, [r.attempt for r in fresh if r.answers_wait and r.attempt])
            # FORBID/DELAY rows and group lanes go, and go on to the next waiter.
            ended = [r.release for r in fresh if r.release is not None]
            in_groups = [r.release[1] for r in fresh if r.release is not None and r.group_release]
            await handon.release(conn, ended, in_groups, now)
            counted = [(r.health, r.causation) for r in fresh if r.health is not None]
            alerts = await self.health.count(conn, counted, now)
        self.alerts.committed(alerts)
        written = {id(r) for r in fresh}
        return [id(r) in written for r in records]


async def _append(conn: asyncpg.Connection, records: list[Record], now: datetime) -> set[str]:
    """Append each record's event after its cause; the streams that had moved on."""
    appends = [(r.cause.stream, r.cause.version, r.event, r.causation) for r in records]
    # a run's start follows its delivery's success, one version later
    appends += [
        (r.cause.stream, r.cause.version + 1, r.then, r.causation) for r in records if r.then
    ]
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


def _settle(batch: list[Pending], result: bool | BaseException) -> None:
    for future in [f for _, f in batch if not f.done()]:
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
