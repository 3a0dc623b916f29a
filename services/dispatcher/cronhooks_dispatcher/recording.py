"""Record what attempts led to, many at a time: a handful of statements per batch.

Every outcome the dispatcher writes has the same shape (`Record`): claim the event that
caused it in the inbox, maybe log an HTTP attempt, append one event after the cause on its
stream, and for finished deliveries release the FORBID slot and update webhook health
(which may raise or resolve an alert, in the same transaction).
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
from typing import Any

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.consumer import claim_events
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import CRON, Causation, Event, EventType, NewEvent
from cronhooks_dispatcher import alerts as alert_rules
from cronhooks_dispatcher import health, lanes
from cronhooks_dispatcher.alerts import AlertPolicy

log = structlog.get_logger(__name__)

INBOX = "dispatcher.inbox"
MAX_BATCH = 500


@dataclass(frozen=True, slots=True)
class Attempt:
    """An HTTP attempt; a row of dispatcher.attempts while it waits for the importer."""

    delivery_id: int
    attempt: int
    webhook_id: int
    started_at: datetime
    duration_ms: int
    request_body: str
    response_status: int | None
    response_body: str | None
    error: str | None
    outcome: str  # success | failed | importing
    request: dict[str, Any]
    request_body_truncated: bool = False


@dataclass(frozen=True, slots=True)
class Health:
    webhook_id: int
    succeeded: bool
    gone: bool
    error: str | None
    kind: str = CRON  # of the webhook (its webhook.disabled says so)


@dataclass(frozen=True, slots=True)
class Record:
    cause: Event  # the event this record answers: claimed in the inbox, followed on its stream
    event: NewEvent
    attempt: Attempt | None = None
    release: tuple[int, int] | None = (
        None  # (webhook_id, delivery_id) of a finished FORBID delivery
    )
    health: Health | None = None
    # The finished delivery may hold an execution group's lane (lanes.may_hold_group).
    group_release: bool = False

    @property
    def causation(self) -> Causation:
        return Causation.following(self.cause, actor="dispatcher")


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
        self._auto_disable_after = auto_disable_after
        self.alerts = alerts or AlertPolicy()
        self._queue: asyncio.Queue[tuple[Record, asyncio.Future[bool]]] = asyncio.Queue()
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
                results = await self._write(batch)
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
                        _settle([item], (await self._write([item]))[0])
                    except Exception as one:
                        _settle([item], one)
                continue
            for (_, future), written in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(written)

    async def _write(self, batch: list[tuple[Record, asyncio.Future[bool]]]) -> list[bool]:
        records = [record for record, _ in batch]
        async with self._pool.acquire() as conn, conn.transaction():
            claimed = await claim_events(conn, INBOX, [r.cause for r in records])
            # A cause claimed in this batch counts once, for its first record.
            fresh: list[Record] = []
            for record in records:
                if record.cause.event_id in claimed:
                    claimed.discard(record.cause.event_id)
                    fresh.append(record)
            moved = await self._append(conn, fresh)
            # A cause someone else already followed on its stream (the watchdog abandoned
            # the delivery meanwhile): its outcome was not recorded, so it keeps, releases
            # and counts nothing.
            fresh = [r for r in fresh if r.cause.stream not in moved]
            await self._attempts(conn, fresh)
            written = {id(r) for r in fresh}
            releases = [r.release for r in fresh if r.release is not None]
            # FORBID/DELAY rows and group lanes go, and go on to the next waiter (lanes.py).
            await lanes.release(
                conn,
                releases,
                [r.release[1] for r in fresh if r.release is not None and r.group_release],
                self._clock.now(),
            )
            alerts = await self._health(conn, [r for r in fresh if r.health is not None])
        self.alerts.committed(alerts)
        return [id(r) in written for r in records]

    async def _append(self, conn: asyncpg.Connection, records: list[Record]) -> set[str]:
        """Append each record's event after its cause; the streams that had moved on."""
        appends = [(r.cause.stream, r.cause.version, r.event, r.causation) for r in records]
        now = self._clock.now()
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

    @staticmethod
    async def _attempts(conn: asyncpg.Connection, records: list[Record]) -> None:
        """Keep an attempt only while it waits for the importer's verdict on its changes
        (`importing`): that is all dispatcher.attempts is read for. Every finished attempt
        lives in its outcome event (and admin-api's attempt log, projected from it)."""
        waiting = [r.attempt for r in records if r.attempt and r.attempt.outcome == "importing"]
        if waiting:
            await conn.execute(
                """
                insert into dispatcher.attempts
                    (delivery_id, attempt, webhook_id, started_at, duration_ms, request_body,
                     response_status, response_body, error, outcome, request,
                     request_body_truncated)
                select * from unnest($1::bigint[], $2::int[], $3::bigint[], $4::timestamptz[],
                                     $5::int[], $6::text[], $7::int[], $8::text[], $9::text[],
                                     $10::text[], $11::jsonb[], $12::bool[])
                on conflict (delivery_id, attempt) do nothing
                """,
                [a.delivery_id for a in waiting],
                [a.attempt for a in waiting],
                [a.webhook_id for a in waiting],
                [a.started_at for a in waiting],
                [a.duration_ms for a in waiting],
                [a.request_body for a in waiting],
                [a.response_status for a in waiting],
                [a.response_body for a in waiting],
                [a.error for a in waiting],
                [a.outcome for a in waiting],
                [a.request for a in waiting],
                [a.request_body_truncated for a in waiting],
            )
        verdicts = [
            r.attempt
            for r in records
            if r.attempt
            and r.attempt.outcome != "importing"
            and r.cause.type in (EventType.NOTES_IMPORTED, EventType.NOTES_REJECTED)
        ]
        if verdicts:  # the importer answered: the attempt no longer waits
            await conn.execute(
                """
                delete from dispatcher.attempts a
                using unnest($1::bigint[], $2::int[]) as f(delivery_id, attempt)
                where a.delivery_id = f.delivery_id and a.attempt = f.attempt
                """,
                [a.delivery_id for a in verdicts],
                [a.attempt for a in verdicts],
            )

    async def _health(self, conn: asyncpg.Connection, records: list[Record]) -> list[Event]:
        """Count the finished deliveries; the alert events this raised or resolved."""
        alerts: list[Event] = []
        by_webhook = {r.health.webhook_id: r for r in records if r.health and r.health.succeeded}
        successes = sorted(by_webhook)
        if successes:
            # Most successes follow a success: the row already says 0 and is left alone.
            # (An upsert that sets 0 anyway rewrites the row, a dead tuple and its WAL, on
            # every delivery of a herd.) An open alert always has a count above 0, so the
            # rows this touches are the only ones that can have an alert to resolve: a
            # success costs nothing more unless it ends a failing spell.
            recovered = await conn.fetch(
                """
                update dispatcher.webhook_health set consecutive_failures = 0
                where webhook_id = any($1::bigint[]) and consecutive_failures <> 0
                returning webhook_id, alert_id, disabled
                """,
                successes,
            )
            await conn.execute(
                """
                insert into dispatcher.webhook_health (webhook_id)
                select unnest($1::bigint[])
                on conflict (webhook_id) do nothing
                """,
                successes,
            )
            for row in recovered:
                if row["alert_id"] is not None:
                    resolved = await alert_rules.resolve(
                        conn,
                        self.alerts,
                        alert_id=row["alert_id"],
                        reason="recovered",
                        disabled=row["disabled"],
                        causation=by_webhook[row["webhook_id"]].causation,
                        now=self._clock.now(),
                    )
                    alerts += [resolved] if resolved else []
        for record in records:  # failures are rare, and each may disable its webhook
            h = record.health
            if h is not None and not h.succeeded:
                raised = await self.count_failure(conn, h, record.causation)
                alerts += [raised] if raised else []
        return alerts

    async def count_failure(
        self, conn: asyncpg.Connection, h: Health, causation: Causation
    ) -> Event | None:
        """Count a failed delivery for its webhook's health (health.py), in `conn`'s
        transaction; the alert event it raised, if any."""
        return await health.record_failure(
            conn,
            webhook_id=h.webhook_id,
            gone=h.gone,
            error=h.error,
            kind=h.kind,
            disable_after=self._auto_disable_after,
            alerts=self.alerts,
            causation=causation,
            now=self._clock.now(),
        )


def _settle(batch: list[tuple[Record, asyncio.Future[bool]]], result: bool | BaseException) -> None:
    for _, future in batch:
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
