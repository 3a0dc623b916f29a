"""Runs of asynchronous agents (CONTRACT §16.2), the importer's half: the agent's report
and heartbeats (runs_api.py answers them), and the end of runs whose deadline passed
(run_sweep.py).

A run's row (`shared.runs`, started by the dispatcher with `run.started`) is locked by
whoever changes it: a report, a heartbeat, the sweep (SKIP LOCKED: replicas take
disjoint runs). Its end appends `run.finished` right after `run.started` on the delivery's
stream (`stream_version`): the store's (stream, version) key lets only one end stand,
whatever races. The row, the event and the report's costs (`shared.daily_costs`, on the
day reported in the webhook's zone) commit together.

A report or a heartbeat that comes after the deadline, before the sweep has seen it, ends
the run as the sweep would (TIMED_OUT, finished at the deadline) and is refused: a run
reported late is still a run without a report by its deadline.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import structlog
from prometheus_client import Counter

from cronhooks_common import daily_costs, eventstore
from cronhooks_common.clock import Clock, iso
from cronhooks_common.events import (
    UNSET,
    AgentLog,
    Causation,
    CostAmount,
    NewEvent,
    RunFinished,
    RunState,
    delivery_stream,
)
from cronhooks_importer import run_queries as q
from cronhooks_importer.run_logs import RunLogs, append_to_run
from cronhooks_importer.run_reports import Report, moved_deadline

log = structlog.get_logger(__name__)

RUNS_FINISHED = Counter(
    "cronhooks_importer_runs_finished_total", "Runs ended (reported or timed out)", ["state"]
)

RUNNING = "RUNNING"
TIMED_OUT_MESSAGE = "no report by the deadline"
# A report may come a few ms after the agent's 202, before the dispatcher has committed
# run.started: a token whose delivery has no run yet, while an attempt of it is in flight,
# is given this long to get one.
WAIT_FOR_RUN = 5.0
WAIT_STEP = 0.1


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: dict[str, Any]


def _refused(status: int, message: str) -> Answer:
    return Answer(status, {"error": message})


NO_RUN = _refused(404, "no run: this token's delivery started none")
EXPIRED = _refused(401, "invalid api_token: token has expired (and its run has finished)")


def _finished_body(row: Any) -> dict[str, Any]:
    return {"run": {"state": row["state"], "finished_at": iso(row["finished_at"])}}


def logs_of(row: Any) -> RunLogs:
    return RunLogs(
        entries=tuple(msgspec.convert(row["logs"], list[AgentLog])),
        count=row["log_count"],
        size=row["log_bytes"],
        dropped=row["logs_dropped"],
        warnings=row["log_warnings"],
    )


@dataclass(frozen=True, slots=True)
class Runs:
    pool: asyncpg.Pool
    clock: Clock
    wait_for_run: float = WAIT_FOR_RUN

    async def report(self, delivery_id: int, report: Report, *, expired: bool) -> Answer:
        """The agent's report: the run ends SUCCEEDED or FAILED (200); the same report
        again is answered the same; any other after the end is a 409."""
        if not await self._has_run(delivery_id):
            return NO_RUN
        async with self.pool.acquire() as conn, conn.transaction():
            now = self.clock.now()
            row = await self._live_row(conn, delivery_id, now)
            if row["state"] != RUNNING:
                if expired:
                    return EXPIRED
                if row["report_digest"] == report.digest:
                    return Answer(200, _finished_body(row))
                return _refused(409, f"the run has finished: {row['state']}")
            grown, costs = append_to_run(logs_of(row), report.logs, report.costs)
            ended = await finish(
                conn, row, report.state, now, report.message, costs, grown, report.digest, now
            )
            if ended is None:  # someone else ended it first (the stream moved)
                return _refused(409, "the run has finished")
            added = daily_costs.reported(row["webhook_id"], costs, now, row["timezone"])
            await daily_costs.add(conn, added)
        log.info("run_reported", delivery_id=delivery_id, state=report.state)
        return Answer(200, _finished_body(ended))

    async def heartbeat(self, delivery_id: int, logs: object, *, expired: bool) -> Answer:
        """The run goes on: its deadline moves (200 `{"deadline"}`), its logs grow."""
        if not await self._has_run(delivery_id):
            return NO_RUN
        async with self.pool.acquire() as conn, conn.transaction():
            now = self.clock.now()
            row = await self._live_row(conn, delivery_id, now)
            if row["state"] != RUNNING:
                return (
                    EXPIRED if expired else _refused(409, f"the run has finished: {row['state']}")
                )
            grown, _ = append_to_run(logs_of(row), logs)
            deadline = moved_deadline(now, row["started_at"], row["timeout_seconds"])
            await conn.execute(q.BEAT, delivery_id, deadline, *_log_columns(grown))
        return Answer(200, {"deadline": iso(deadline)})

    async def _has_run(self, delivery_id: int) -> bool:
        """Whether the delivery has a run, waiting a little for one that may be committed
        any moment (a report right after the 202, while an attempt is in flight)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.wait_for_run
        stream = delivery_stream(delivery_id)
        while True:
            row = await self.pool.fetchrow(q.HAS_RUN, delivery_id, stream)
            if row["has_run"]:
                return True
            if not row["in_flight"] or loop.time() >= give_up:
                return False
            await asyncio.sleep(WAIT_STEP)

    async def _live_row(self, conn: asyncpg.Connection, delivery_id: int, now: datetime) -> Any:
        """The run's row, locked; a running run past its deadline is timed out first."""
        row = await conn.fetchrow(q.LOCK_RUN, delivery_id)
        if row["state"] == RUNNING and row["deadline"] <= now:
            row = await time_out(conn, row, now) or await conn.fetchrow(q.LOCK_RUN, delivery_id)
        return row


async def time_out(conn: asyncpg.Connection, row: Any, now: datetime) -> Any:
    """End a running run whose deadline passed: TIMED_OUT, finished at the deadline."""
    ended = await finish(
        conn, row, "TIMED_OUT", row["deadline"], TIMED_OUT_MESSAGE, [], logs_of(row), None, now
    )
    if ended is not None:
        log.info("run_timed_out", delivery_id=row["delivery_id"], deadline=iso(row["deadline"]))
    return ended


async def finish(
    conn: asyncpg.Connection,
    row: Any,
    state: RunState,
    finished_at: datetime,
    message: str | None,
    costs: list[CostAmount],
    logs: RunLogs,
    digest: str | None,
    now: datetime,
) -> dict[str, Any] | None:
    """Append `run.finished` after `run.started` and write the row's end; the row as it is
    now, or None if the stream had moved (another end stands: nothing is written)."""
    finished = RunFinished(
        delivery_id=row["delivery_id"],
        webhook_id=row["webhook_id"],
        kind=row["kind"],
        state=state,
        costs=costs,
        started_at=iso(row["started_at"]),
        trace=row["trace"] if row["trace"] is not None else UNSET,
        finished_at=iso(finished_at),
        message=message,
        deadline=iso(row["deadline"]),
        cause="report" if digest is not None else "timeout",
    )
    stream = delivery_stream(row["delivery_id"])
    started = await conn.fetchrow(q.STARTED, row["delivery_id"], stream, row["stream_version"])
    causation = (  # the end follows the start (a run whose events retention took: a chain)
        Causation(started["correlation_id"], started["event_id"], "importer")
        if started is not None
        else Causation.new(actor="importer")
    )
    try:
        async with conn.transaction():  # a savepoint: a refused append leaves nothing
            await eventstore.append(
                conn,
                stream,
                [NewEvent.of(finished)],
                expected_version=row["stream_version"],
                causation=causation,
                occurred_at=now,
            )
    except eventstore.ConcurrencyError:
        log.warning("run_end_refused", delivery_id=row["delivery_id"], state=state)
        return None
    RUNS_FINISHED.labels(state).inc()
    kept_costs = msgspec.to_builtins(costs)
    columns = (state, finished_at, message, kept_costs, *_log_columns(logs), digest)
    await conn.execute(q.FINISH, row["delivery_id"], *columns)
    return {**dict(row), "state": state, "finished_at": finished_at, "report_digest": digest}


def _log_columns(logs: RunLogs) -> tuple[Any, ...]:
    entries = msgspec.to_builtins(list(logs.entries))
    return (entries, logs.count, logs.size, logs.dropped, logs.warnings)


async def sweep(pool: asyncpg.Pool, now: datetime, limit: int) -> int:
    """Time out the running runs whose deadline passed (at most `limit`); how many."""
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(q.OVERDUE_RUNS, now, limit)
        for row in rows:
            await time_out(conn, row, now)
    return len(rows)
