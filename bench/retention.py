"""`python -m bench retention`: database size after DELIVERIES deliveries spread over DAYS
simulated days, kept forever (retention 0) and with the defaults (30 days, attempt logs 7).

Synthetic, straight into the tables with SQL (the bench is about storage, not HTTP): each
delivery is a `delivery.requested` and a `delivery.succeeded` event (the latter with a
request body of ~600 bytes and a response of ~200, as the dispatcher records them), a
dispatcher inbox row, an `admin.deliveries` row, an `admin.delivery_attempts` row and its
`admin.attempt_logs` row with the bodies, and a `scheduler.slot_requests` row. Each simulated day the retention job runs with a ManualClock a day later, and
the projector's checkpoint is moved to the end of the store (it would have read it).
`python -m bench retention --lookups` is the hot-path micro-bench (retention_lookups.py).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import asyncpg

from bench.common import scratch_database, table
from cronhooks_common.clock import ManualClock
from cronhooks_scheduler.retention import RetentionJob

DELIVERIES = 1_000_000
DAYS = 60

_DAY = """
with ids as (
    select nextval('eventstore.delivery_ids') as d from generate_series(1, $1)
), requested as (
    insert into eventstore.events
        (stream, version, event_id, type, data, correlation_id, occurred_at, delivery_id)
    select 'delivery-' || d, 1, gen_random_uuid(), 'delivery.requested',
           jsonb_build_object('delivery_id', d, 'webhook_id', 1 + d % 1000, 'kind', 'cron',
                              'attempt', 1, 'trigger', 'schedule', 'scheduled_for', $2::timestamptz,
                              'url', 'https://agent.example/hooks/' || (d % 1000),
                              'instruction', 'Summarise the notes changed today.',
                              'timeout_seconds', 30),
           gen_random_uuid(), $2::timestamptz, d
    from ids
    returning delivery_id
), succeeded as (
    insert into eventstore.events
        (stream, version, event_id, type, data, correlation_id, occurred_at, delivery_id)
    select 'delivery-' || d, 2, gen_random_uuid(), 'delivery.succeeded',
           jsonb_build_object('delivery_id', d, 'webhook_id', 1 + d % 1000, 'kind', 'cron',
                              'attempt', 1, 'status', 'success', 'response_status', 200,
                              'duration_ms', 40, 'request_body', repeat('r', 600),
                              'response_body', repeat('a', 200)),
           gen_random_uuid(), $2::timestamptz, d
    from ids
    returning event_id, delivery_id
), inbox as (
    insert into dispatcher.inbox (event_id, delivery_id)
    select event_id, delivery_id from succeeded
), deliveries as (
    insert into admin.deliveries
        (id, cron_webhook_id, status, trigger, scheduled_for, attempt, response_status,
         duration_ms, created_at, completed_at)
    select d, 1 + d % 1000, 'success', 'schedule', $2::timestamptz, 1, 200, 40, $2::timestamptz,
           $2::timestamptz
    from ids
), attempts as (
    insert into admin.delivery_attempts
        (delivery_id, attempt, response_status, duration_ms, started_at)
    select d, 1, 200, 40, $2::timestamptz from ids
), logs as (
    insert into admin.attempt_logs (delivery_id, attempt, request_body, response_body)
    select d, 1, repeat('r', 600), repeat('a', 200) from ids
), slots as (
    insert into scheduler.slot_requests (webhook_id, slot, delivery_id)
    select 1 + d % 1000, $2::timestamptz + ((d / 1000) % 600) * interval '1 minute', d
    from ids
)
select count(*) from ids
"""
_CAUGHT_UP = """
update admin.projection_checkpoints set (txid, position) =
    (select txid, position from eventstore.events order by txid desc, position desc limit 1)
where name = 'live'
"""


async def _simulate(dsn: str, retention_days: int, log_days: int) -> tuple[int, int, float]:
    """(database bytes, delivery buckets left, seconds) after the simulated days."""
    start = time.monotonic()
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        job = RetentionJob(
            pool=pool,
            clock=clock,
            delivery_retention_days=retention_days,
            attempt_log_retention_days=log_days,
        )
        await job.step()
        per_day = DELIVERIES // DAYS
        for day in range(DAYS):
            count = per_day if day < DAYS - 1 else DELIVERIES - per_day * (DAYS - 1)
            await pool.execute(_DAY, count, clock.now())
            await pool.execute(_CAUGHT_UP)
            clock.advance(timedelta(days=1))
            await job.step()
        await pool.execute("vacuum analyze")
        size = await pool.fetchval("select pg_database_size(current_database())")
        buckets = await pool.fetchval("select count(*) from eventstore.buckets")
    finally:
        await pool.close()
    return size, buckets, time.monotonic() - start


async def sizes() -> list[tuple[str, str]]:
    rows = []
    for days, log_days in ((0, 0), (30, 7)):
        async with scratch_database() as dsn:
            size, buckets, seconds = await _simulate(dsn, days, log_days)
        label = "0 / 0 (kept forever)" if days == 0 else f"{days} / {log_days} (the defaults)"
        rows.append([label, f"{size / 1e6:,.0f}", buckets, f"{seconds:.0f}"])
    headers = ["DELIVERY / ATTEMPT_LOG_RETENTION_DAYS", "pg_database_size, MB", "buckets"]
    text = table([*headers, "seconds"], rows)
    title = f"Database size after {DELIVERIES:,} deliveries over {DAYS} simulated days"
    return [(title, text)]
