"""Migration 0020 (retention's delivery buckets) on a live database: what was there before
survives, in the partitions it belongs to, and the store stays append-only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from cronhooks_common import eventstore
from cronhooks_common.buckets import Router
from cronhooks_common.events import Causation, NewEvent
from cronhooks_common.migrate import available_migrations, ensure_database, migrate
from tests.conftest import RUN_ID, _drop_database, dsn_for

BUCKETS = 20  # the migrations that introduce them


@pytest.fixture
async def before_buckets() -> object:
    """A database with every migration before 0020 applied, the way `migrate` does."""
    name = f"cronhooks_test_{RUN_ID}_mig20_{uuid.uuid4().hex[:6]}"
    dsn = dsn_for(name)
    await ensure_database(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "create table public.cronhooks_migrations (component text, version integer,"
            " name text, checksum text, applied_at timestamptz not null default now(),"
            " primary key (component, version))"
        )
        for m in available_migrations():
            if m.version < BUCKETS:
                await conn.execute(m.sql)
                await conn.execute(
                    "insert into public.cronhooks_migrations values ($1, $2, $3, $4)",
                    m.component,
                    m.version,
                    m.name,
                    m.checksum,
                )
    finally:
        await conn.close()
    yield dsn
    await _drop_database(name)


_OLD_EVENTS = """
insert into eventstore.events
    (stream, version, event_id, type, data, correlation_id, occurred_at)
values ('webhook-1', 1, $1, 'webhook.created', '{"webhook_id": 1}', $4, now()),
       ('delivery-7', 1, $2, 'delivery.requested', '{"delivery_id": 7}', $4, now()),
       ('delivery-7', 2, $3, 'delivery.succeeded', '{"delivery_id": 7}', $4, now())
"""


async def test_existing_rows_survive_in_their_partitions(before_buckets: str) -> None:
    dsn = before_buckets
    ids = [uuid.uuid4() for _ in range(3)]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("select setval('eventstore.delivery_ids', 7)")
        await conn.execute(_OLD_EVENTS, *ids, uuid.uuid4())
        await conn.execute(
            "insert into eventstore.outbox (position)"
            " select position from eventstore.events where event_id = $1",
            ids[2],
        )
        await conn.execute("insert into dispatcher.inbox (event_id) values ($1)", ids[1])
        await conn.execute("insert into scheduler.inbox (event_id) values ($1)", ids[0])
        await conn.execute("insert into scheduler.slot_requests values (1, now(), 7)")
        await conn.execute(
            "insert into admin.deliveries (id, cron_webhook_id, status, trigger, attempt,"
            " created_at) values (7, 1, 'success', 'schedule', 1, now())"
        )
        await conn.execute(
            "insert into admin.delivery_attempts (delivery_id, attempt, request_body,"
            " response_status, response_body, duration_ms, started_at)"
            " values (7, 1, '{\"id\": 7}', 200, 'ok', 12, now())"
        )
        before = await conn.fetch(
            "select stream, version, position, event_id, txid from eventstore.events"
            " order by position"
        )
    finally:
        await conn.close()

    applied = await migrate(dsn)
    # 0020 and every migration after it, of every component; none before it again.
    assert sorted((m.component, m.version) for m in applied) == sorted(
        (m.component, m.version) for m in available_migrations() if m.version >= BUCKETS
    )

    conn = await asyncpg.connect(dsn)
    try:
        after = await conn.fetch(
            "select stream, version, position, event_id, txid from eventstore.events"
            " order by position"
        )
        assert [dict(r) for r in after] == [dict(r) for r in before]
        where = await conn.fetch(
            "select e.stream, e.tableoid::regclass::text as part from eventstore.events e"
            " order by position"
        )
        assert [r["part"] for r in where] == [
            "eventstore.events_kept",
            "eventstore.events_b1",
            "eventstore.events_b1",
        ]
        assert await conn.fetchval("select delivery_id from eventstore.outbox") == 7
        assert (
            await conn.fetchval(
                "select delivery_id from dispatcher.inbox where event_id = $1", ids[1]
            )
            == 7
        )
        assert (
            await conn.fetchval(
                "select delivery_id from scheduler.inbox where event_id = $1", ids[0]
            )
            == 0
        )
        assert await conn.fetchval("select status from admin.deliveries where id = 7") == "success"
        assert (
            await conn.fetchval(
                "select tableoid::regclass::text from scheduler.slot_requests where delivery_id = 7"
            )
            == "scheduler.slot_requests_before"
        )
        log = await conn.fetchrow("select * from admin.attempt_logs where delivery_id = 7")
        assert (log["request_body"], log["response_body"]) == ('{"id": 7}', "ok")
        assert (
            await conn.fetchval(
                "select response_status from admin.delivery_attempts where delivery_id = 7"
            )
            == 200
        )
        # Still append-only, through the parent and a partition alike.
        for table in ("eventstore.events", "eventstore.events_b1", "eventstore.events_kept"):
            with pytest.raises(asyncpg.RaiseError, match="append-only"):
                await conn.execute(f"delete from {table}")
        # Appends go on after the old positions; reads find old and new alike.
        async with conn.transaction():
            new = await eventstore.append(
                conn,
                "delivery-7",
                [NewEvent("test.noted", {})],
                expected_version=2,
                causation=Causation.new(),
                occurred_at=datetime.now(UTC),
            )
        position = await conn.fetchval(
            "select position from eventstore.events where event_id = $1", new[0].event_id
        )
        assert position > max(r["position"] for r in before)
        found = await eventstore.read_events(
            conn, [(ids[1], "delivery-7"), (new[0].event_id, "delivery-7")], Router()
        )
        assert set(found) == {ids[1], new[0].event_id}
    finally:
        await conn.close()
