"""Replicas of the dispatcher never double an alert: two of them recording failures of one
webhook at the same moment raise one alert between them (the health row's lock decides)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg

from cronhooks_common.clock import ManualClock
from cronhooks_common.events import Causation
from cronhooks_common.settings import Settings
from cronhooks_dispatcher import health
from cronhooks_dispatcher.alerts import AlertPolicy
from tests.support.flows import create_webhook
from tests.support.inprocess import admin_token, running


async def test_two_replicas_failing_one_webhook_at_once_raise_one_alert(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    now = datetime.now(UTC)
    async with running(settings, ManualClock(now), names=("admin-api",)) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, "http://127.0.0.1:9/hook")
    # A spell already past CRONHOOKS_ALERT_AFTER with no alert yet (say, the operator
    # lowered it): both replicas' failures see enough failures to raise.
    await pool.execute(
        "insert into dispatcher.webhook_health (webhook_id, consecutive_failures) values ($1, 4)",
        hook,
    )
    policy = AlertPolicy(alert_after=3)

    async def replica() -> object:
        async with pool.acquire() as conn, conn.transaction():
            raised = await health.record_failure(
                conn,
                webhook_id=hook,
                gone=False,
                error="HTTP 500",
                disable_after=20,
                alerts=policy,
                causation=Causation.new("dispatcher"),
                now=now,
            )
            await asyncio.sleep(0.2)  # hold the row: the other replica waits for this commit
            return raised

    results = await asyncio.gather(replica(), replica())
    assert sum(result is not None for result in results) == 1
    streams = await pool.fetch(
        "select stream, type from eventstore.events where stream like 'alert-%'"
    )
    [(stream, kind)] = [(s["stream"], s["type"]) for s in streams]
    assert kind == "alert.raised"
    row = await pool.fetchrow(
        "select consecutive_failures, alert_id from dispatcher.webhook_health"
        " where webhook_id = $1",
        hook,
    )
    assert row["consecutive_failures"] == 6 and stream == f"alert-{row['alert_id']}"
