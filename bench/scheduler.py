"""Scheduler benchmarks: a burst of due timers, and the cost of one wake vs registered count.

* burst: N webhooks due at the same instant → time until every one is a
  `delivery.requested` event (the scheduler's own work: claim, decide, append, move).
* wake: a wake with a few timers due (claim + next-due lookup), median of many wakes,
  with 1,000 / 100,000 / 1,000,000 webhooks registered.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import asyncpg

from bench.common import median, percentile, scratch_database, table
from cronhooks_common import db
from cronhooks_scheduler.firing import fire_due

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
CONFIG = {
    "cron_schedule": "0 9 * * *",
    "timezone": "UTC",
    "enabled": True,
    "misfire_grace_seconds": 60,
    "catch_up_policy": "LATEST_ONCE",
    "url": "http://agent.example/hook",
    "instruction": "Write the digest",
    "timeout_seconds": 60,
    "pass_api_key": False,
    "read_patterns": ["*"],
    "write_patterns": [],
    "max_depth": 1,
    "max_retries": 0,
}


async def _seed(pool: asyncpg.Pool, registered: int, due: int) -> None:
    await pool.execute(
        "insert into scheduler.webhooks (webhook_id, stream_version, config)"
        " select g, 1, $2::jsonb from generate_series(1, $1) g",
        registered,
        CONFIG,
    )
    await pool.execute(
        """insert into scheduler.timers (timer_key, kind, subject, due_at)
           select 'cron:' || g, 'cron', g,
                  case when g <= $2 then $3::timestamptz
                       else $3::timestamptz + interval '1 day' + (g || ' seconds')::interval end
           from generate_series(1, $1) g""",
        registered,
        due,
        NOW,
    )
    await pool.execute("vacuum analyze scheduler.timers")


async def burst(n: int, batch_size: int = 1000) -> dict[str, object]:
    async with scratch_database() as dsn:
        pool = await db.create_pool(dsn, name="bench", max_size=4)
        try:
            await _seed(pool, n, due=n)
            started = time.perf_counter()
            batches = 0
            while await fire_due(pool, now=NOW + timedelta(milliseconds=5), batch_size=batch_size):
                batches += 1
            elapsed = time.perf_counter() - started
            events = await pool.fetchval("select count(*) from eventstore.events")
        finally:
            await pool.close()
    return {
        "due": n,
        "batches": batches,
        "events": events,
        "seconds": elapsed,
        "per_second": n / elapsed,
    }


async def wake_cost(registered: int, due: int = 5, wakes: int = 200) -> dict[str, object]:
    async with scratch_database() as dsn:
        pool = await db.create_pool(dsn, name="bench", max_size=4)
        try:
            await _seed(pool, registered, due=due)
            samples = []
            for i in range(wakes):
                now = NOW + timedelta(minutes=i, milliseconds=5)
                # Put the few due timers back at `now` (not timed): each wake finds `due`.
                await pool.execute(
                    "update scheduler.timers set due_at = $1 where subject <= $2", now, due
                )
                started = time.perf_counter()
                claimed = await fire_due(pool, now=now)
                await pool.fetchval("select min(due_at) from scheduler.timers")
                samples.append(time.perf_counter() - started)
                assert claimed == due
        finally:
            await pool.close()
    return {
        "registered": registered,
        "due": due,
        "wakes": wakes,
        "p50_ms": median(samples) * 1000,
        "p95_ms": percentile(samples, 95) * 1000,
    }


async def run(sizes: tuple[int, ...] = (1_000, 100_000, 1_000_000)) -> list[tuple[str, str]]:
    b = await burst(10_000)
    burst_table = table(
        ["due timers", "batches", "events", "seconds", "slots/s"],
        [[b["due"], b["batches"], b["events"], f"{b['seconds']:.2f}", f"{b['per_second']:.0f}"]],
    )
    wake_rows = []
    for size in sizes:
        w = await wake_cost(size)
        wake_rows.append(
            [f"{size:,}", w["due"], w["wakes"], f"{w['p50_ms']:.2f}", f"{w['p95_ms']:.2f}"]
        )
    wake_table = table(["registered", "due per wake", "wakes", "p50 ms", "p95 ms"], wake_rows)
    return [
        ("Scheduler burst: 10,000 slots due at one instant", burst_table),
        ("Scheduler wake cost", wake_table),
    ]
