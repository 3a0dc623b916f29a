"""Runs of asynchronous agents (CONTRACT §16.2), the dispatcher's half.

* A `202` answer to a request that carried an `api_token` is `delivery.succeeded`, followed
  on the delivery's stream in the same append by `run.started` (`started`), and the run's
  `shared.runs` row, RUNNING (`insert`, in the RecordWriter's transaction). Such a
  delivery keeps its FORBID/DELAY lane and its execution group's lane, and its webhook's
  health is not counted yet: the run is still under way.
* `run.finished` (the importer's: the agent's report, or its deadline passing) ends it
  for the lanes and for health (`finish_run`): the lanes go to whoever waits (handon.py);
  FAILED and TIMED_OUT count as a failed delivery (consecutive failures, auto-disable,
  alerts, with the run's message as the error), SUCCEEDED resets the count. Once, by the
  inbox.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import asyncpg
import structlog

from cronhooks_common.clock import iso
from cronhooks_common.consumer import claim_event
from cronhooks_common.events import (
    RUN_TIMEOUT_SECONDS,
    UNSET,
    Causation,
    DeliverySucceeded,
    Event,
    NewEvent,
    RunFinished,
    RunStarted,
)
from cronhooks_dispatcher import handon, queries
from cronhooks_dispatcher.deps import Call, Fault
from cronhooks_dispatcher.health import Health

if TYPE_CHECKING:  # record.py calls this module
    from cronhooks_dispatcher.record import Record

log = structlog.get_logger(__name__)


def timeout_of(record: Record) -> int:
    """The run's runTimeoutSeconds: the request's target's, else the default."""
    assert record.attempt is not None
    given = record.attempt.request.target.run_timeout_seconds
    return RUN_TIMEOUT_SECONDS if given is UNSET or not given else int(given)


def started(record: Record, now: datetime) -> Record:
    """The record of a finished attempt, with its run's start when the attempt starts one:
    a success answered `202` to a request that carried a token. Such a delivery keeps its
    lanes and is not counted for health until its run finishes."""
    attempt = record.attempt
    if (
        attempt is None
        or record.event.type != DeliverySucceeded.TYPE
        or attempt.response_status != 202
        or not attempt.minted_token
    ):
        return record
    request = attempt.request
    run = RunStarted(
        delivery_id=request.delivery_id,
        webhook_id=request.webhook_id,
        kind=request.kind,
        state="RUNNING",
        costs=[],
        started_at=iso(now),
        trace=request.trace,
        deadline=iso(now + timedelta(seconds=timeout_of(record))),
        attempt=request.attempt,
    )
    log.info("run_started", deadline=run.deadline)
    return dataclasses.replace(
        record, then=NewEvent.of(run), release=None, group_release=False, health=None
    )


async def insert(conn: asyncpg.Connection, records: Sequence[Record]) -> None:
    """The rows of the runs these records start (their events were appended)."""
    rows = []
    for r in records:
        if r.then is None or r.attempt is None:
            continue
        request = r.attempt.request
        run = r.then.data
        rows.append(
            (
                request.delivery_id,
                request.webhook_id,
                request.kind,
                datetime.fromisoformat(run["started_at"]),
                datetime.fromisoformat(run["deadline"]),
                timeout_of(r),
                request.target.timezone or "UTC",  # a change webhook's days are UTC's
                run.get("trace"),
                r.cause.version + 2,  # after the cause: the success, then the start
            )
        )
    if rows:
        columns = (list(column) for column in zip(*rows, strict=True))
        await conn.execute(queries.START_RUNS, *columns)


async def finish_run(call: Call, event: Event, run: RunFinished) -> None:
    """A run ended: its delivery's lanes go on, and it counts for its webhook's health."""
    deps = call.deps
    alerts = []
    async with deps.pool.acquire() as conn, conn.transaction():
        if not await claim_event(conn, queries.INBOX, event):
            return
        now = deps.clock.now()
        delivery_id = run.delivery_id
        await handon.release(conn, [(run.webhook_id, delivery_id)], [delivery_id], now)
        ok = run.state == "SUCCEEDED"
        error = None if ok else (run.message or f"run {run.state.lower()}")
        counted = Health(run.webhook_id, ok, False, error, run.kind)
        causation = Causation.following(event, actor="dispatcher")
        alerts = await deps.writer.health.count(conn, [(counted, causation)], now)
    log.info("run_finished", delivery_id=run.delivery_id, state=run.state)
    deps.writer.alerts.committed(alerts)


async def release_by_fault(fault: Fault, event: Event, run: RunFinished) -> None:
    """A run's end that cannot be handled (poison) still hands its delivery's lanes on, so
    nothing waits behind a dead letter; its health is not counted."""
    deps = fault.deps
    async with deps.pool.acquire() as conn, conn.transaction():
        if not await claim_event(conn, queries.INBOX, event):
            return
        pair = [(run.webhook_id, run.delivery_id)]
        await handon.release(conn, pair, [run.delivery_id], deps.clock.now())
    log.error("run_end_failed", delivery_id=run.delivery_id, error=repr(fault.error))
