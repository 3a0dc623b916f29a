"""Retention of runs (CONTRACT §12, §16.2) on the real Postgres, time moved by a ManualClock:
a running run holds its delivery's bucket; once it finished, its row of `shared.runs`
leaves with the bucket, while runs of kept deliveries and the daily cost totals stay.

Until the run core lands, the run is written here as the dispatcher and importer will
write it (its events on the delivery's stream, its row in shared.runs): the retention
job is what is tested."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.clock import ManualClock, iso
from cronhooks_common.events import Causation, NewEvent, RunFinished, RunStarted
from cronhooks_scheduler.retention import RetentionJob

DAY = timedelta(days=1)
# What the delivery's stream held before its run: the bucket only looks at its last event.
SUCCEEDED = NewEvent("test.succeeded", {})
CAUGHT_UP = (
    "(select txid, position from eventstore.events order by txid desc, position desc limit 1)"
)


def started(delivery_id: int, at: datetime) -> RunStarted:
    return RunStarted(
        delivery_id=delivery_id,
        webhook_id=3,
        kind="cron",
        state="RUNNING",
        costs=[],
        started_at=iso(at),
        deadline=iso(at + timedelta(hours=1)),
        attempt=1,
    )


def ended(run: RunStarted, at: datetime) -> RunFinished:
    return RunFinished(
        delivery_id=run.delivery_id,
        webhook_id=run.webhook_id,
        kind=run.kind,
        state="FAILED",
        costs=[],
        started_at=run.started_at,
        finished_at=iso(at),
        message="gave up",
        deadline=run.deadline,
    )


async def append(
    conn: asyncpg.Connection, delivery_id: int, version: int, *events: NewEvent, at: datetime
) -> None:
    await eventstore.append(
        conn,
        f"delivery-{delivery_id}",
        list(events),
        expected_version=version,
        causation=Causation.new(),
        occurred_at=at,
    )


async def insert_run(pool: asyncpg.Pool, delivery_id: int, at: datetime) -> None:
    await pool.execute(
        "insert into shared.runs (delivery_id, webhook_id, kind, state, started_at, deadline,"
        " timeout_seconds, stream_version, costs)"
        " values ($1, 3, 'cron', 'RUNNING', $2, $3, 3600, 2, $4::jsonb)",
        delivery_id,
        at,
        at + timedelta(hours=1),
        json.dumps([{"unit": "usd", "amount": 0.5}]),
    )


async def test_a_finished_run_leaves_with_its_bucket_and_the_cost_totals_stay(
    pool: asyncpg.Pool,
) -> None:
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    job = RetentionJob(pool=pool, clock=clock, delivery_retention_days=30)
    await job.step()
    old = await pool.fetchval("select nextval('eventstore.delivery_ids')")
    run = started(old, clock.now())
    async with pool.acquire() as conn, conn.transaction():
        await append(conn, old, 0, SUCCEEDED, NewEvent.of(run), at=clock.now())
    await insert_run(pool, old, clock.now())
    await pool.execute("insert into shared.daily_costs values (3, $1, 'usd', 0.5)", clock.now())
    clock.advance(DAY + timedelta(minutes=1))
    await job.step()  # the old delivery's bucket closes: new ids go to the next one
    clock.advance(timedelta(days=40))

    # Still running: its stream ends in run.started, so the delivery has not finished.
    with structlog.testing.capture_logs() as logs:
        assert await job.step() == []
    held = [x for x in logs if x["event"] == "retention_bucket_held"]
    assert held and held[0]["reason"] == "unfinished_deliveries", logs
    assert held[0]["example"] == f"delivery-{old}"

    async with pool.acquire() as conn, conn.transaction():
        await append(conn, old, 2, NewEvent.of(ended(run, clock.now())), at=clock.now())
    await pool.execute("update shared.runs set state = 'FAILED' where delivery_id = $1", old)
    await job.step()  # sealed now; the readers have not read it yet
    await pool.execute(
        f"update admin.projection_checkpoints set (txid, position) = {CAUGHT_UP}"
        " where name = 'live'"
    )
    await pool.execute(f"update scheduler.watchdog_checkpoint set (txid, position) = {CAUGHT_UP}")
    assert await job.step() == []  # its last event, run.finished, is young
    clock.advance(timedelta(days=30, minutes=1))
    young = await pool.fetchval("select nextval('eventstore.delivery_ids')")
    await insert_run(pool, young, clock.now())  # a kept delivery's (its events do not matter)
    assert 1 in await job.step()
    runs = await pool.fetch("select delivery_id from shared.runs order by delivery_id")
    assert [r["delivery_id"] for r in runs] == [young]
    assert await pool.fetchval("select count(*) from shared.daily_costs") == 1
