"""Scheduler replicas as real processes: every slot requested once, with one delivery id,
also when a replica is killed with SIGKILL in the middle of its work."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronhooks_common.settings import Settings
from tests.support.processes import free_port, service_log
from tests.support.seeds import scheduler_config

pytestmark = pytest.mark.e2e

WEBHOOKS = 100
BACKLOG_MINUTES = 120  # each webhook has a slot every minute for the last two hours
CONFIG = scheduler_config(
    # A week of grace: every backlog slot is late but not missed, so each one is
    # delivered on its own — thousands of fast slots without waiting for the clock.
    misfire_grace_seconds=7 * 86400,
    catch_up_policy="ALL",
    url="http://agent.invalid/",
)


async def seed(dsn: str) -> datetime:
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=BACKLOG_MINUTES)
    conn = await asyncpg.connect(dsn)
    try:
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
    finally:
        await conn.close()
    return start


async def start_replica(settings: Settings, n: int) -> asyncio.subprocess.Process:
    env = {**os.environ, **settings.to_env(), "CRONHOOKS_SCHEDULER_PORT": str(free_port())}
    log = open(service_log(f"scheduler-replica-{n}"), "ab")  # noqa: SIM115, ASYNC230
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cronhooks_cli.cli",
        "run",
        "scheduler",
        env=env,
        stdout=log,
        stderr=log,
    )


async def caught_up(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval("select min(due_at) > now() from scheduler.timers"))


async def check(dsn: str, start: datetime) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        for _ in range(600):
            if await caught_up(conn):
                break
            await asyncio.sleep(0.1)
        assert await caught_up(conn)
        requests = await conn.fetch(
            "select webhook_id, slot, delivery_id from scheduler.slot_requests"
        )
        events = await conn.fetch(
            "select (data->>'webhook_id')::bigint as webhook_id, data->>'scheduled_for' as slot,"
            " (data->>'delivery_id')::bigint as delivery_id from eventstore.events"
            " where type = 'delivery.requested'"
        )
        timers = {
            r["subject"]: r["due_at"]
            for r in await conn.fetch("select subject, due_at from scheduler.timers")
        }
    finally:
        await conn.close()
    # One event per slot request, same delivery ids, no slot twice.
    assert len(events) == len(requests)
    assert {e["delivery_id"] for e in events} == {r["delivery_id"] for r in requests}
    assert len({(e["webhook_id"], e["slot"]) for e in events}) == len(events)
    # No gap: every minute from the start up to (not including) the timer's next slot.
    by_webhook: dict[int, list[datetime]] = {}
    for r in requests:
        by_webhook.setdefault(r["webhook_id"], []).append(r["slot"])
    assert set(by_webhook) == set(range(1, WEBHOOKS + 1))
    for webhook_id, slots in by_webhook.items():
        minutes = int((timers[webhook_id] - start).total_seconds() // 60)
        assert sorted(slots) == [start + timedelta(minutes=i) for i in range(minutes)], webhook_id
    return {"slots": len(requests)}


async def test_three_replicas_request_every_slot_once(settings: Settings) -> None:
    start = await seed(settings.database_url)
    replicas = [await start_replica(settings, n) for n in range(3)]
    try:
        result = await check(settings.database_url, start)
        print(f"\n3 replicas: {result['slots']} slots, no duplicate, no gap")
        assert result["slots"] >= WEBHOOKS * BACKLOG_MINUTES
    finally:
        for proc in replicas:
            proc.send_signal(signal.SIGTERM)
        for proc in replicas:
            assert await asyncio.wait_for(proc.wait(), 40) == 0


async def test_a_replica_killed_mid_batch_loses_and_duplicates_nothing(settings: Settings) -> None:
    start = await seed(settings.database_url)
    victim = await start_replica(settings, 0)
    conn = await asyncpg.connect(settings.database_url)
    try:
        # Wait until the victim is working through the backlog, then bring up the others
        # and kill it while it holds a batch.
        for _ in range(300):
            if await conn.fetchval("select count(*) from scheduler.slot_requests"):
                break
            await asyncio.sleep(0.02)
        others = [await start_replica(settings, n) for n in (1, 2)]
        await asyncio.sleep(0.1)
        in_flight = await conn.fetchval(
            "select count(*) from pg_stat_activity where application_name = 'cronhooks-scheduler'"
            " and datname = current_database()"  # not another instance's (`make up` beside)
            " and (state like 'idle in transaction%' or state = 'active')"
        )
        victim.send_signal(signal.SIGKILL)
        assert await victim.wait() == -signal.SIGKILL
        done_before = await conn.fetchval("select count(*) from scheduler.slot_requests")
    finally:
        await conn.close()
    try:
        result = await check(settings.database_url, start)
        print(
            f"\nkilled one replica after {done_before} slots (transactions in flight: "
            f"{in_flight}); survivors finished {result['slots']} slots, no duplicate, no gap"
        )
        assert done_before < result["slots"]
    finally:
        for proc in others:
            proc.send_signal(signal.SIGTERM)
        for proc in others:
            assert await asyncio.wait_for(proc.wait(), 40) == 0
