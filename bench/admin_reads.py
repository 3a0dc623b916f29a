"""Admin read latency: `cronWebhooks` with 10,000 webhooks, and
`cronWebhookDeliveries(limit: 50)` with 1,000,000 delivery rows, against admin-api.

The read models are filled directly with SQL (the bench is about reading them)."""

from __future__ import annotations

import time

import aiohttp
import asyncpg

from bench.common import percentile, table
from bench.harness import running_cluster

WEBHOOKS = 10_000
DELIVERIES = 1_000_000
REPEAT = 30

BASIC = "{ cronWebhooks { id url cronSchedule nextRunAt lastDeliveryStatus enabled } }"
PAGE = """{ cronWebhooks { id url cronSchedule timezone description enabled nextRunAt
  lastDeliveryStatus disabledReason stats { last7d { total successRate } } } }"""
HISTORY = """query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id, limit: 50) {
  id status trigger scheduledFor attempt durationMs error
  attempts { attempt responseStatus durationMs startedAt } } }"""


async def _seed(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            """
            insert into admin.webhooks
                (id, stream_version, url, cron_schedule, timezone, instruction, has_secret,
                 pass_api_key, timeout_seconds, max_depth, max_retries, enabled, description,
                 read_patterns, write_patterns, concurrency_policy, catch_up_policy,
                 misfire_grace_seconds, next_run_at, created_at, updated_at, next_run_set_at)
            select g, 1, 'https://agent.example/hook/' || g, '*/5 * * * *', 'UTC', 'digest',
                   true, false, 60, 1, 0, true, 'webhook ' || g, '["*"]', '[]', 'ALLOW',
                   'LATEST_ONCE', 60, now() + interval '5 minutes', now(), now(), now()
            from generate_series(1, $1) g
            """,
            WEBHOOKS,
        )
        # A million deliveries over the last 30 days; webhook 1 has 100,000 of them.
        await conn.execute(
            """
            insert into admin.deliveries
                (id, cron_webhook_id, status, trigger, scheduled_for, attempt, response_status,
                 duration_ms, created_at, completed_at)
            select g, case when g % 10 = 0 then 1 else 1 + g % $2 end,
                   case when g % 7 = 0 then 'failed' else 'success' end, 'schedule',
                   now() - (g || ' seconds')::interval * 2.5, 1, 200, 20 + g % 300,
                   now() - (g || ' seconds')::interval * 2.5,
                   now() - (g || ' seconds')::interval * 2.5 + interval '1 second'
            from generate_series(1, $1) g
            """,
            DELIVERIES,
            WEBHOOKS,
        )
        await conn.execute(
            """
            insert into admin.delivery_attempts
                (delivery_id, attempt, response_status, duration_ms, started_at)
            select id, 1, 200, duration_ms, created_at
            from admin.deliveries where cron_webhook_id = 1
            """
        )
        await conn.execute(
            """
            insert into admin.attempt_logs (delivery_id, attempt, request_body, response_body)
            select id, 1, '{"version":1}', '{"status":"ok"}'
            from admin.deliveries where cron_webhook_id = 1
            """
        )
        await conn.execute(
            "vacuum analyze admin.webhooks, admin.deliveries, admin.delivery_attempts"
        )
    finally:
        await conn.close()


async def _latency(
    session: aiohttp.ClientSession,
    cluster,
    query: str,  # type: ignore[no-untyped-def]
    variables: dict | None = None,
) -> tuple[float, float, int]:  # type: ignore[type-arg]
    samples, size = [], 0
    for _ in range(REPEAT):
        started = time.perf_counter()
        body = await cluster.graphql(session, query, variables)
        samples.append(time.perf_counter() - started)
        assert "errors" not in body, body
        size = len(next(iter(body["data"].values())))
    return percentile(samples, 50) * 1000, percentile(samples, 95) * 1000, size


async def admin_reads() -> list[tuple[str, str]]:
    async with running_cluster() as cluster, aiohttp.ClientSession() as session:
        await _seed(cluster.dsn)
        rows = []
        for name, query, variables in (
            ("cronWebhooks (list fields), 10,000 webhooks", BASIC, None),
            ("cronWebhooks (web page fields, with 7 d stats), 10,000 webhooks", PAGE, None),
            ("cronWebhookDeliveries(limit: 50) with attempts, 1,000,000 rows", HISTORY, {"id": 1}),
        ):
            p50, p95, size = await _latency(session, cluster, query, variables)
            rows.append([name, size, REPEAT, f"{p50:.0f}", f"{p95:.0f}"])
    return [("Admin read latency", table(["query", "items", "runs", "p50 ms", "p95 ms"], rows))]
