"""The pause switch (CONTRACT §16.4) with scheduler replicas as real processes: the switch
is a row in Postgres, so both skip every slot of a backlog as `paused` and hold a due
agent-cron fire; when the pause's `until` has passed, exactly one `deliveries.resumed` is
appended and the held fire is requested exactly once."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronhooks_common import pause
from cronhooks_common.clock import iso
from cronhooks_common.events import DeliveriesPaused, TriggerArmed
from cronhooks_common.settings import Settings
from tests.e2e.test_scheduler_replicas import start_replica
from tests.support.seeds import scheduler_config

pytestmark = pytest.mark.e2e

WEBHOOKS = 20
BACKLOG_MINUTES = 30
CONFIG = scheduler_config(
    misfire_grace_seconds=7 * 86400, catch_up_policy="ALL", url="http://agent.invalid/"
)


async def seed(conn: asyncpg.Connection) -> datetime:
    """A paused platform (no until), a backlog of slots and an agent-cron fire due."""
    now = datetime.now(UTC)
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=BACKLOG_MINUTES)
    async with conn.transaction():
        await pause.locked(conn)
        paused = DeliveriesPaused(
            since=iso(now), until=None, reason="outage", by="admin:1:ops", replaced=False
        )
        await pause.pause(conn, paused, since=now, until=None, now=now)
    await conn.execute(
        "insert into scheduler.webhooks (webhook_id, stream_version, config)"
        " select g, 1, $2::jsonb from generate_series(1, $1) g",
        WEBHOOKS,
        json.dumps(CONFIG),
    )
    await conn.execute(
        "insert into scheduler.timers (timer_key, kind, subject, due_at)"
        " select 'cron:' || g, 'cron', g, $2 from generate_series(1, $1) g",
        WEBHOOKS,
        start,
    )
    armed = TriggerArmed(
        agent_id=1,
        job_id="j",
        schedule_id=str(uuid.uuid4()),
        instance_id="inst",
        fire_at=iso(start),
        callback_url="http://agent.invalid/cb",
        generation=1,
        dedup_key=None,
    )
    await conn.execute(
        "insert into scheduler.timers (timer_key, kind, subject, due_at, payload)"
        " values ('trigger:1:j', 'trigger', 1, $1, $2::jsonb)",
        start,
        json.dumps(armed.to_data()),
    )
    return start


async def count(conn: asyncpg.Connection, event_type: str) -> int:
    return int(
        await conn.fetchval("select count(*) from eventstore.events where type = $1", event_type)
    )


async def until_true(check, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout * 10)):
        if await check():
            return
        await asyncio.sleep(0.1)
    assert await check()


async def test_two_scheduler_processes_skip_while_paused_and_resume_once(
    settings: Settings,
) -> None:
    conn = await asyncpg.connect(settings.database_url)
    replicas = []
    try:
        await seed(conn)
        replicas = [await start_replica(settings, n) for n in range(2)]
        await until_true(lambda: _slots_caught_up(conn))
        skipped = await conn.fetchval(
            "select count(*) from eventstore.events"
            " where type = 'delivery.skipped' and data->>'reason' = 'paused'"
        )
        assert skipped == await conn.fetchval("select count(*) from scheduler.slot_requests")
        assert skipped >= WEBHOOKS * BACKLOG_MINUTES
        assert await count(conn, "delivery.requested") == 0
        assert await count(conn, "trigger.requested") == 0  # held
        assert await conn.fetchval("select count(*) from scheduler.timers where kind = 'trigger'")

        # The pause's until passes (set in the past, as if it had come): both replicas
        # look, one ends it.
        await conn.execute(
            "update shared.delivery_pause set until = now() - interval '1 second';"
            " select pg_notify('cronhooks_timers', '')"
        )

        async def resumed() -> bool:
            return await count(conn, "deliveries.resumed") >= 1

        await until_true(resumed)
        await until_true(lambda: _fired(conn))
        await asyncio.sleep(0.5)  # a second resume or fire would have come by now
        assert await count(conn, "deliveries.resumed") == 1
        assert await count(conn, "trigger.requested") == 1
        assert await conn.fetchval("select since from shared.delivery_pause") is None
    finally:
        for proc in replicas:
            proc.send_signal(signal.SIGTERM)
        for proc in replicas:
            assert await asyncio.wait_for(proc.wait(), 40) == 0
        await conn.close()


async def _fired(conn: asyncpg.Connection) -> bool:
    return await count(conn, "trigger.requested") >= 1


async def _slots_caught_up(conn: asyncpg.Connection) -> bool:
    """Every cron timer is in the future (the held trigger timer stays due)."""
    return bool(
        await conn.fetchval("select min(due_at) > now() from scheduler.timers where kind = 'cron'")
    )
