"""Retention (CONTRACT §12) with the real services, Postgres and RabbitMQ, time moved by a
ManualClock: old finished deliveries leave every table, a rebuild equals what is kept, an
unfinished delivery holds its bucket, 0 keeps forever, GraphQL works on pruned data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import pytest
import structlog
from aiohttp import web

from cronhooks_admin.projections.live_tail import LiveTail
from cronhooks_common import eventstore
from cronhooks_common.clock import ManualClock
from cronhooks_common.events import Causation, NewEvent
from cronhooks_common.settings import Settings
from cronhooks_common.tail import START
from cronhooks_scheduler.day_partitions import day_name, midnight, partition_ends
from cronhooks_scheduler.retention import RetentionJob
from tests.support.agent import Agent, Received
from tests.support.flows import (
    create_webhook,
    finished,
    retry_due,
    trigger,
)
from tests.support.graphql import DELIVERY
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.projections import TABLES, quiet, rebuild, snapshot
from tests.support.system import System

DAY = timedelta(days=1)
NEVER_HERE = "0 0 29 2 *"  # no slot fires while these tests move the clock a month or so
# Every table that holds rows of a delivery bucket, and its delivery-id column.
BUCKETED = {
    "eventstore.events": "delivery_id",
    "dispatcher.inbox": "delivery_id",
    "scheduler.inbox": "delivery_id",
    "importer.inbox": "delivery_id",
    "admin.deliveries": "id",
    "admin.delivery_attempts": "delivery_id",
}


ATTEMPTS = """query($id: Int!) { cronWebhookDelivery(id: $id) {
  attempts { attempt requestBody responseStatus responseBody logsExpired } } }"""


def with_retention(settings: Settings, days: int) -> Settings:
    return Settings.from_mapping(
        {**settings.to_env(), "CRONHOOKS_DELIVERY_RETENTION_DAYS": str(days)}
    )


async def _bucket_of(dsn: str, delivery_id: int) -> int | None:
    conn = await asyncpg.connect(dsn)
    try:
        bucket: int | None = await conn.fetchval(
            "select bucket from eventstore.buckets where lo <= $1 and $1 < hi", delivery_id
        )
        return bucket
    finally:
        await conn.close()


async def _rows_of(dsn: str, delivery_id: int) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return {
            table: await conn.fetchval(
                f"select count(*) from {table} where {column} = $1", delivery_id
            )
            for table, column in BUCKETED.items()
        }
    finally:
        await conn.close()


async def _a_day_later(r: Running, clock: ManualClock, dsn: str, delivery_id: int) -> None:
    """Move a day on and wait until the job has opened the next bucket (ids after
    `delivery_id` then fall in it)."""
    before = await _bucket_of(dsn, delivery_id)
    clock.advance(DAY + timedelta(minutes=10))
    r.services["scheduler"].retention.poke()

    async def opened() -> bool:
        conn = await asyncpg.connect(dsn)
        try:
            newest = await conn.fetchval(
                "select max(bucket) from eventstore.buckets where opened_at is not null"
            )
        finally:
            await conn.close()
        return bool(newest > before)

    await eventually(opened, timeout=15)


async def test_old_deliveries_leave_every_table_and_a_rebuild_equals_what_is_kept(
    settings: Settings, vhost: str, agent: Agent
) -> None:
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        answers = iter([500] + [200] * 10)

        async def failing_once(_: web.Request, __: Received) -> web.StreamResponse:
            return web.Response(status=next(answers))

        hook, _ = await create_webhook(
            r, token, agent.url_for("once", failing_once), cronSchedule=NEVER_HERE, maxRetries=1
        )
        old = await trigger(r, token, hook)  # fails, then its retry succeeds
        await eventually(lambda: retry_due(settings.database_url, old))
        clock.advance(timedelta(seconds=10))
        await finished(r, token, old)
        await _a_day_later(r, clock, settings.database_url, old)
        kept = await trigger(r, token, hook)
        await finished(r, token, kept)
        assert await _bucket_of(settings.database_url, old) != await _bucket_of(
            settings.database_url, kept
        )
        # Its events, inbox rows (the dispatcher's; the scheduler's for the failed
        # attempt), delivery and two attempts.
        assert (await _rows_of(settings.database_url, old)) == {
            **dict.fromkeys(BUCKETED, 1),
            "eventstore.events": 4,
            "dispatcher.inbox": 2,
            "admin.delivery_attempts": 2,
            "importer.inbox": 0,
        }

        # A bucket goes once its successor has been open for the retention: 30 days and
        # an hour after the kept delivery (and the bucket it opened), 31 after the old one.
        clock.advance(timedelta(days=30, hours=1))
        r.services["scheduler"].retention.poke()

        async def gone() -> bool:
            return not any((await _rows_of(settings.database_url, old)).values())

        await eventually(gone, timeout=15)
        assert (await _rows_of(settings.database_url, kept))["admin.deliveries"] == 1
        # GraphQL on pruned data: the old delivery is simply not there, the kept one is.
        _, body = await r.graphql(token, DELIVERY, {"id": old})
        assert "errors" not in body and body["data"]["cronWebhookDelivery"] is None
        _, body = await r.graphql(
            token,
            "query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id, limit: 10) { id } }",
            {"id": hook},
        )
        assert [d["id"] for d in body["data"]["cronWebhookDeliveries"]] == [kept]
        await quiet(settings.database_url, vhost)
        live = await snapshot(settings.database_url)
    await rebuild(settings)
    rebuilt = await snapshot(settings.database_url)
    for table in TABLES:
        assert rebuilt[table] == live[table], table


async def test_attempt_bodies_are_dropped_after_seven_days(system: System, agent: Agent) -> None:
    hook, _ = await create_webhook(
        system, system.admin, agent.url_for("ok", lambda *_: _ok()), cronSchedule=NEVER_HERE
    )
    old = await trigger(system, system.admin, hook)
    await finished(system, system.admin, old)
    await _a_day_later(system, system.clock, system.dsn, old)
    young = await trigger(system, system.admin, hook)
    await finished(system, system.admin, young)
    # The old delivery's bucket closed when the young one's opened: 7 days after
    # that, its attempt logs go.
    system.clock.advance(timedelta(days=7, minutes=1))
    system.services["scheduler"].retention.poke()

    async def attempt(delivery_id: int) -> dict[str, Any]:
        _, body = await system.graphql(system.admin, ATTEMPTS, {"id": delivery_id})
        return body["data"]["cronWebhookDelivery"]["attempts"][0]  # type: ignore[no-any-return]

    async def expired() -> dict[str, Any] | None:
        got = await attempt(old)
        return got if got["logsExpired"] else None

    gone = await eventually(expired, timeout=15)
    assert (gone["requestBody"], gone["responseBody"]) == (None, None)
    assert gone["responseStatus"] == 200  # the attempt row stays
    kept = await attempt(young)
    assert kept["requestBody"] and kept["logsExpired"] is False
    # The web page's own query of the history still answers on pruned data.
    async with aiohttp.ClientSession() as session:
        page = await session.get(f"{system.urls['admin-api']}/")
        assert page.status == 200


async def test_zero_keeps_forever(settings: Settings, agent: Agent) -> None:
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    async with running(with_retention(settings, 0), clock) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(
            r, token, agent.url_for("ok", lambda *_: _ok()), cronSchedule=NEVER_HERE
        )
        old = await trigger(r, token, hook)
        await finished(r, token, old)
        await _a_day_later(r, clock, settings.database_url, old)
        clock.advance(timedelta(days=400))
        job = r.services["scheduler"].retention
        assert await job.step() == []
        assert (await _rows_of(settings.database_url, old))["eventstore.events"] == 2


async def a_closed_bucket_of_one_delivery(
    pool: asyncpg.Pool, event_type: str
) -> tuple[RetentionJob, int]:
    """A retention job whose bucket 1 holds one delivery, of one event of that type, and
    closed 40 days ago; and the delivery's id."""
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    job = RetentionJob(pool=pool, clock=clock, delivery_retention_days=30)
    async with pool.acquire() as conn, conn.transaction():
        first = await conn.fetchval("select nextval('eventstore.delivery_ids')")
        await eventstore.append(
            conn,
            f"delivery-{first}",
            [NewEvent(event_type, {"delivery_id": first})],
            expected_version=0,
            causation=Causation.new(),
            occurred_at=clock.now(),
        )
    await job.step()
    clock.advance(DAY + timedelta(minutes=1))
    await job.step()  # bucket 1 closes: new ids go to the next one
    clock.advance(timedelta(days=40))
    return job, first


async def test_an_unfinished_delivery_holds_its_bucket(pool: asyncpg.Pool) -> None:
    # A delivery whose last event is no outcome (still retrying, say).
    job, first = await a_closed_bucket_of_one_delivery(pool, "test.requested")
    with structlog.testing.capture_logs() as logs:
        assert await job.step() == []
    held = [x for x in logs if x["event"] == "retention_bucket_held"]
    assert held and held[0]["reason"] == "unfinished_deliveries", logs
    assert held[0]["example"] == f"delivery-{first}"
    assert await pool.fetchval("select count(*) from eventstore.buckets where bucket = 1") == 1


async def test_a_bucket_waits_for_the_projector(pool: asyncpg.Pool) -> None:
    """A reader that has not read a bucket's last event holds it (a long-down admin-api)."""
    job, _ = await a_closed_bucket_of_one_delivery(pool, "delivery.skipped")
    with structlog.testing.capture_logs() as logs:
        assert await job.step() == []
    held = [x for x in logs if x["event"] == "retention_bucket_held"]
    assert held and held[0]["reason"] == "not_yet_read"
    assert held[0]["readers"] == ["admin-api projector", "scheduler watchdog"]
    last = (
        "(select txid, position from eventstore.events order by txid desc, position desc limit 1)"
    )
    # Once the projector has read past it, only the watchdog holds it; then it goes.
    await pool.execute(
        f"update admin.projection_checkpoints set (txid, position) = {last} where name = 'live'"
    )
    with structlog.testing.capture_logs() as logs:
        assert await job.step() == []
    held = [x for x in logs if x["event"] == "retention_bucket_held"]
    assert held[0]["readers"] == ["scheduler watchdog"]
    await pool.execute(f"update scheduler.watchdog_checkpoint set (txid, position) = {last}")
    assert await job.step() == [1]
    assert await pool.fetchval("select to_regclass('eventstore.events_b1')") is None
    # The test's delivery.skipped is not a valid event; it left with its bucket.


async def _ok() -> web.StreamResponse:
    return web.Response(status=200)


async def test_a_sealed_bucket_refuses_appends_and_leaves_the_projectors_reads(
    pool: asyncpg.Pool,
) -> None:
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    job = RetentionJob(pool=pool, clock=clock, delivery_retention_days=30)
    await job.step()
    clock.advance(DAY + timedelta(minutes=1))
    await job.step()  # bucket 1 closes, empty
    tail = LiveTail()
    async with pool.acquire() as conn:
        await tail.read_after(conn, START, 10)
        assert "eventstore.events_b1" in tail.tables(START)
        clock.advance(timedelta(minutes=11))
        await job.step()  # ... and is sealed: every delivery in it (none) has finished
        await tail.read_after(conn, START, 10)  # sees the generation move, loads again
        assert tail.tables(START) == [
            "eventstore.events_kept",
            "eventstore.events_default",
            "eventstore.events_b2",
            "eventstore.events_b3",
        ]
        with pytest.raises(asyncpg.CheckViolationError):
            async with conn.transaction():
                await eventstore.append(
                    conn,
                    "delivery-1",
                    [NewEvent("test.requested", {"delivery_id": 1})],
                    expected_version=0,
                    causation=Causation.new(),
                    occurred_at=clock.now(),
                )


async def test_slot_requests_are_kept_by_day_and_stay_unique(pool: asyncpg.Pool) -> None:
    # The clock starts in the last second of the migration's day, which `_before` covers:
    # the wall clock may have passed midnight since the database was migrated.
    clock = ManualClock(
        await _end_of_before(pool, "scheduler.slot_requests") - timedelta(seconds=1)
    )
    job = RetentionJob(pool=pool, clock=clock, delivery_retention_days=30)
    await job.step()
    tomorrow = clock.now() + DAY
    insert = (
        "insert into scheduler.slot_requests values (1, $1, $2)"
        " on conflict (webhook_id, slot) do nothing returning tableoid::regclass::text"
    )
    slots = "scheduler.slot_requests"
    assert await pool.fetchval(insert, tomorrow, 5) == day_name(slots, midnight(tomorrow))
    assert await pool.fetchval(insert, tomorrow, 6) is None  # one slot, one delivery id
    assert await pool.fetchval(insert, clock.now(), 7) == "scheduler.slot_requests_before"
    clock.advance(timedelta(days=33))
    await job.step()
    assert await pool.fetchval("select count(*) from scheduler.slot_requests") == 0
    assert await pool.fetchval("select to_regclass('scheduler.slot_requests_before')") is None
    assert await pool.fetchval(insert, clock.now(), 8) == day_name(slots, midnight(clock.now()))
    # The importer's change requests are kept by day the same way.
    assert await pool.fetchval(
        "select to_regclass($1)", day_name("importer.change_requests", midnight(clock.now()))
    )


async def _end_of_before(pool: asyncpg.Pool, table: str) -> datetime:
    """Where `{table}_before` (the rows from before migration 0020) ends."""
    async with pool.acquire() as conn:
        return (await partition_ends(conn, table))[f"{table}_before"]


async def test_old_daily_budget_counts_are_forgotten(pool: asyncpg.Pool) -> None:
    # maxDeliveriesPerDay's counts (shared.daily_deliveries) grow by a row per budgeted
    # webhook and day: kept as long as the deliveries (plus a day for every zone's dates).
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    today = clock.now().date()
    for age in (0, 30, 31, 32, 40):
        await pool.execute(
            "insert into shared.daily_deliveries values (7, $1, 3)", today - timedelta(days=age)
        )
    await RetentionJob(pool=pool, clock=clock, delivery_retention_days=30).step()
    rows = await pool.fetch("select day from shared.daily_deliveries order by day desc")
    assert [today - r["day"] for r in rows] == [timedelta(0), timedelta(30), timedelta(31)]
    await RetentionJob(pool=pool, clock=clock, delivery_retention_days=0).step()  # keeps all
    assert await pool.fetchval("select count(*) from shared.daily_deliveries") == 3
