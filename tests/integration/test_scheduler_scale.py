"""The cost of a scheduler wake does not grow with the number of registered webhooks:
both of its queries walk the due-time index (checked on the plan, not on a stopwatch)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import asyncpg

from cronhooks_scheduler.firing import fire_due
from cronhooks_scheduler.queries import CLAIM, EARLIEST_TIMER
from tests.support.seeds import scheduler_config

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
CONFIG = scheduler_config(cron_schedule="0 9 * * *", catch_up_policy="LATEST_ONCE", url="http://a/")


async def seed(pool: asyncpg.Pool, registered: int, due: int) -> None:
    await pool.execute(
        "insert into scheduler.webhooks (webhook_id, stream_version, config)"
        " select g, 1, $2::jsonb from generate_series(1, $1) g",
        registered,
        CONFIG,
    )
    # Most timers are far away; `due` of them are due now.
    await pool.execute(
        """insert into scheduler.timers (timer_key, kind, subject, due_at)
           select 'cron:' || g, 'cron', g,
                  case when g <= $2 then $3::timestamptz
                       else $3::timestamptz + (g || ' minutes')::interval end
           from generate_series(1, $1) g""",
        registered,
        due,
        NOW,
    )
    await pool.execute("analyze scheduler.timers")


def _nodes(plan: dict) -> list[dict]:  # type: ignore[type-arg]
    out = [plan]
    for child in plan.get("Plans", []):
        out.extend(_nodes(child))
    return out


async def plan_of(pool: asyncpg.Pool, sql: str, *args: object) -> list[dict]:  # type: ignore[type-arg]
    async with pool.acquire() as conn, conn.transaction():
        raw = await conn.fetchval(f"explain (format json) {sql}", *args)
    # The json codec of our pools has already decoded the plan.
    return _nodes((json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"])


async def test_wake_queries_use_the_due_time_index_with_100k_registered(pool: asyncpg.Pool) -> None:
    await seed(pool, 100_000, due=5)
    for sql, args in ((CLAIM, (NOW, 500)), (EARLIEST_TIMER, ())):
        nodes = await plan_of(pool, sql, *args)
        scans = [n for n in nodes if n.get("Relation Name") == "timers"]
        assert scans, nodes
        assert all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scans), scans
        assert all(n.get("Index Name") == "timers_due_at" for n in scans), scans
    started = time.perf_counter()
    claimed = await fire_due(pool, now=NOW + timedelta(milliseconds=5))
    elapsed = time.perf_counter() - started
    assert claimed == 5
    assert await pool.fetchval("select count(*) from eventstore.events") == 5
    print(f"\nwake with 100,000 registered, 5 due: {elapsed * 1000:.1f} ms")
