"""kill -9 of the scheduler while its watchdog abandons overdue deliveries (CONTRACT §15):
after a restart every one of them is abandoned, and none twice.

The deliveries were requested ten minutes ago while no dispatcher ran: their requests are
appended to the event store as of then (the store is the truth; a herd requested during
an outage looks exactly like this), so no test waits a wall-clock minute for a deadline.
Real processes (`cronhooks run`), the real database and broker."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec
import pytest

from cronhooks_common import db, eventstore
from cronhooks_common.clock import iso
from cronhooks_common.events import CRON, Causation, EventType, NewEvent, delivery_stream
from cronhooks_common.settings import Settings
from cronhooks_common.webhooks import target_of
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.processes import cluster

pytestmark = pytest.mark.e2e
OVERDUE = 2_000


async def request_long_ago(dsn: str, webhook_id: int, count: int) -> list[int]:
    """`count` requests of the webhook as if made ten minutes ago; their delivery ids."""
    conn = await db.connect(dsn, name="test")
    try:
        created = await conn.fetchval(
            "select data from eventstore.events where stream = $1 and version = 1",
            f"webhook-{webhook_id}",
        )
        target = msgspec.to_builtins(target_of(created["config"]))
        ids = [
            r["id"]
            for r in await conn.fetch(
                "select nextval('eventstore.delivery_ids') as id from generate_series(1, $1)",
                count,
            )
        ]
        then = datetime.now(UTC) - timedelta(minutes=10)
        appends = [
            (
                delivery_stream(i),
                0,
                NewEvent(
                    EventType.DELIVERY_REQUESTED,
                    {
                        "delivery_id": i,
                        "webhook_id": webhook_id,
                        "kind": CRON,
                        "attempt": 1,
                        "trigger": "manual",
                        "scheduled_for": None,
                        "missed_count": 0,
                        "target": target,
                    },
                ),
                Causation.new("test"),
            )
            for i in ids
        ]
        async with conn.transaction():
            await eventstore.append_many(conn, appends, occurred_at=then)
        return ids
    finally:
        await conn.close()


async def failures(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch(
        "select stream, count(*) as n from eventstore.events"
        " where type = 'delivery.failed' and data->>'error' = 'abandoned' group by stream"
    )
    return {r["stream"]: r["n"] for r in rows}


async def test_kill_9_of_the_scheduler_while_it_abandons_loses_and_doubles_nothing(
    settings: Settings,
) -> None:
    async with cluster(settings, ("admin-api", "importer", "scheduler")) as c:
        token = await c.admin_token("kill")
        created = await c.graphql(
            token,
            CREATE_WEBHOOK,
            {
                "input": {
                    "url": "https://agent.example/hook",
                    "cronSchedule": "0 0 1 1 *",
                    "timeoutSeconds": 1,
                }
            },
        )
        hook = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
        ids = await request_long_ago(settings.database_url, hook, OVERDUE)
        streams = {delivery_stream(i) for i in ids}

        conn = await db.connect(settings.database_url, name="test")
        try:
            for _ in range(600):  # the first step's abandonments have committed
                if await failures(conn):
                    break
                await asyncio.sleep(0.05)
            c.procs["scheduler"].send_signal(signal.SIGKILL)
            assert await c.procs["scheduler"].wait() == -signal.SIGKILL
            c.procs.pop("scheduler")
            at_kill = await failures(conn)
            assert 0 < len(at_kill) < OVERDUE, len(at_kill)  # killed half way

            await c.start("scheduler")
            await c.wait_ready("scheduler")
            for _ in range(1200):
                done = await failures(conn)
                if len(done) == OVERDUE:
                    break
                await asyncio.sleep(0.1)
            assert set(done) == streams  # every one abandoned
            assert set(done.values()) == {1}  # none twice
            assert await conn.fetchval("select count(*) from scheduler.watched") == 0
            # The read model shows them failed, as abandoned.
            for _ in range(300):
                shown = await conn.fetchval(
                    "select count(*) from admin.deliveries"
                    " where status = 'failed' and error = 'abandoned'"
                )
                if shown == OVERDUE:
                    break
                await asyncio.sleep(0.1)
            assert shown == OVERDUE
        finally:
            await conn.close()
        print(
            f"\nwatchdog kill -9: {len(at_kill)} of {OVERDUE} abandoned at the kill, "
            f"all {OVERDUE} once after the restart ({iso(datetime.now(UTC))})"
        )
