"""Runs (CONTRACT §16.2) under kill -9 (part of the fault suite), the services as
processes on the real clock: no acknowledged report is lost and none ends its run twice
when the importer is killed; a run whose deadline passed while the importer, or every
service with the scheduler, was down times out exactly once when they are back."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

import aiohttp
import asyncpg
import pytest

from cronhooks_common.settings import Settings
from tests.support.agent import Agent
from tests.support.graphql import TRIGGER_WEBHOOK
from tests.support.lanes import admin, create
from tests.support.processes import Cluster, cluster
from tests.support.runs import REPORT, AsyncAgent

pytestmark = pytest.mark.faults

RUNS = 20


async def kill_9(c: Cluster, service: str) -> None:
    proc = c.procs.pop(service)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


async def restart(c: Cluster, service: str) -> None:
    await c.start(service)
    await c.wait_ready(service)


async def start_runs(c: Cluster, runner: AsyncAgent, dsn: str, count: int) -> dict[int, str]:
    """`count` runs, each of a webhook of its own: delivery id → its api_token."""
    token = await admin(c)
    ids = []
    for _ in range(count):
        hook = await create(c, token, runner.url, cronSchedule="0 0 1 1 *", passApiKey=True)
        body = await c.graphql(token, TRIGGER_WEBHOOK, {"id": hook})
        ids.append(int(body["data"]["triggerCronWebhook"]["deliveryId"]))
    conn = await asyncpg.connect(dsn)
    try:
        for _ in range(600):
            running = await conn.fetchval(
                "select count(*) from shared.runs where delivery_id = any($1::bigint[])", ids
            )
            if running == count:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"{running} of {count} runs started")
    finally:
        await conn.close()
    return {i: runner.token_of(i) for i in ids}


async def ends_of(dsn: str, ids: list[int]) -> dict[int, list[Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "select delivery_id, data::text as data from eventstore.events"
            " where type = 'run.finished' and delivery_id = any($1::bigint[])",
            ids,
        )
        found: dict[int, list[Any]] = {i: [] for i in ids}
        for r in rows:
            found[r["delivery_id"]].append(r["data"])
        return found
    finally:
        await conn.close()


async def run_ended(conn: asyncpg.Connection, delivery_id: int, within: float) -> Any:
    """The run's row once it is no longer RUNNING, or as it is after `within` seconds."""
    for _ in range(int(within / 0.05)):
        row = await conn.fetchrow(
            "select state, finished_at from shared.runs where delivery_id = $1", delivery_id
        )
        if row["state"] != "RUNNING":
            break
        await asyncio.sleep(0.05)
    return row


async def failures_counted(conn: asyncpg.Connection, expected: int) -> int:
    """The webhook's consecutive failures once they reach `expected` (or after 10 s)."""
    for _ in range(200):
        failures = int(
            await conn.fetchval("select consecutive_failures from dispatcher.webhook_health") or 0
        )
        if failures == expected:
            break
        await asyncio.sleep(0.05)
    return failures


async def test_no_acknowledged_report_is_lost_when_the_importer_is_killed(
    settings: Settings, agent: Agent
) -> None:
    runner = AsyncAgent(agent)
    async with cluster(settings) as c:
        tokens = await start_runs(c, runner, settings.database_url, RUNS)
        acknowledged: dict[int, int] = {}  # delivery → the status that acknowledged it
        some_done = asyncio.Event()

        async def send(session: aiohttp.ClientSession, delivery_id: int, token: str) -> None:
            # as an agent does: again until answered (a 409 would mean a second end)
            body = {"status": "ok", "message": f"run {delivery_id}", "costs": {"tokens": 1}}
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.post(
                        f"{c.url('importer')}{REPORT}",
                        json=body,
                        headers={"Authorization": f"Bearer {token}"},
                    ) as resp:
                        if resp.status < 500:
                            acknowledged[delivery_id] = resp.status
                            if len(acknowledged) >= 4:
                                some_done.set()
                            return
                await asyncio.sleep(0.05)

        async def reports() -> None:
            # two agents at a time, one report after another: the kill lands among them
            async with aiohttp.ClientSession() as session:
                items = list(tokens.items())
                for pair in (items[i : i + 2] for i in range(0, len(items), 2)):
                    await asyncio.gather(*(send(session, i, t) for i, t in pair))
                    await asyncio.sleep(0.02)

        sending = asyncio.create_task(reports())
        await asyncio.wait_for(some_done.wait(), 30)
        await kill_9(c, "importer")  # reports in flight, more to come
        assert len(acknowledged) < RUNS
        await asyncio.sleep(0.5)
        await restart(c, "importer")
        await asyncio.wait_for(sending, 60)
        assert set(acknowledged.values()) == {200}, acknowledged  # the same report: a 200
        ends = await ends_of(settings.database_url, list(tokens))
        assert all(len(e) == 1 for e in ends.values()), ends  # one end each, none lost
        conn = await asyncpg.connect(settings.database_url)
        try:
            states = await conn.fetch(
                "select state from shared.runs where delivery_id = any($1::bigint[])",
                list(tokens),
            )
            spent = await conn.fetchval("select sum(amount) from shared.daily_costs")
        finally:
            await conn.close()
        assert [r["state"] for r in states] == ["SUCCEEDED"] * RUNS
        assert spent == RUNS  # each run's costs counted once


async def test_a_deadline_that_passes_while_the_importer_is_down_times_out_once(
    settings: Settings, agent: Agent
) -> None:
    runner = AsyncAgent(agent)
    async with cluster(settings) as c:
        [(delivery_id, _)] = (await start_runs(c, runner, settings.database_url, 1)).items()
        await kill_9(c, "importer")
        conn = await asyncpg.connect(settings.database_url)
        try:
            # The deadline passes while the importer is down (the real clock: the run's
            # deadline is set an hour nearer, as the hour passing would).
            deadline = await conn.fetchval(
                "update shared.runs set deadline = now() - interval '2 seconds'"
                " where delivery_id = $1 returning deadline",
                delivery_id,
            )
            await asyncio.sleep(0.5)
            assert (
                await conn.fetchval(
                    "select state from shared.runs where delivery_id = $1", delivery_id
                )
                == "RUNNING"
            )
            await restart(c, "importer")
            row = await run_ended(conn, delivery_id, within=5)
            assert row["state"] == "TIMED_OUT" and row["finished_at"] == deadline
            # a second importer start (another kill) ends nothing again
            await kill_9(c, "importer")
            await restart(c, "importer")
            await asyncio.sleep(2)
            ends = await ends_of(settings.database_url, [delivery_id])
            assert len(ends[delivery_id]) == 1
            # the dispatcher counted it: a failed delivery of its webhook
            assert await failures_counted(conn, 1) == 1
        finally:
            await conn.close()


async def test_a_deadline_that_passes_while_every_service_is_down_times_out_once(
    settings: Settings, agent: Agent
) -> None:
    """kill -9 of all four services (the scheduler among them) across a run's deadline:
    when they are back the run times out exactly once, is counted once, and is not left
    RUNNING; the scheduler's watchdog does not end its delivery a second time."""
    runner = AsyncAgent(agent)
    async with cluster(settings) as c:
        [(delivery_id, _)] = (await start_runs(c, runner, settings.database_url, 1)).items()
        for service in ("scheduler", "dispatcher", "importer", "admin-api"):
            await kill_9(c, service)
        conn = await asyncpg.connect(settings.database_url)
        try:
            deadline = await conn.fetchval(
                "update shared.runs set deadline = now() - interval '2 seconds'"
                " where delivery_id = $1 returning deadline",
                delivery_id,
            )
            for service in ("scheduler", "dispatcher", "importer", "admin-api"):
                await restart(c, service)
            row = await run_ended(conn, delivery_id, within=10)
            assert row["state"] == "TIMED_OUT" and row["finished_at"] == deadline
            assert await failures_counted(conn, 1) == 1
            # the scheduler killed again: its restart (and watchdog) ends nothing twice
            await kill_9(c, "scheduler")
            await restart(c, "scheduler")
            await asyncio.sleep(2)
            assert len((await ends_of(settings.database_url, [delivery_id]))[delivery_id]) == 1
            ended = await conn.fetchval(
                "select count(*) from eventstore.events where delivery_id = $1"
                " and type in ('delivery.failed', 'delivery.succeeded')",
                delivery_id,
            )
            assert ended == 1  # its one success (the 202); the run's end is run.finished
            assert (
                await conn.fetchval("select consecutive_failures from dispatcher.webhook_health")
                == 1
            )
        finally:
            await conn.close()
