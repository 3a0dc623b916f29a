"""Destination limits with two dispatcher replicas as real processes (CONTRACT §17): each
process keeps its own limit, so a destination sees at most the limit times the replicas,
and each replica at most the limit."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from cronhooks_common.settings import Settings
from tests.support.destinations import TimingAgent, Visit, peak, ports_of
from tests.support.graphql import CREATE_WEBHOOK, TRIGGER_WEBHOOK
from tests.support.processes import cluster

pytestmark = pytest.mark.e2e

LIMIT = 2
DELIVERIES = 16


async def test_each_replica_keeps_its_own_limit(settings: Settings) -> None:
    agent = await TimingAgent(seconds=0.4).start()
    try:
        async with cluster(settings) as c:
            await c.start_replica("dispatcher", "dispatcher-2")
            token = await c.admin_token("replicas")
            body = await c.graphql(
                token,
                "mutation { setDestinationLimit(destination: "
                f'"{agent.url("")}", maxConcurrent: {LIMIT}) {{ destination }} }}',
            )
            assert "errors" not in body, body
            created = await c.graphql(
                token,
                CREATE_WEBHOOK,
                {"input": {"url": agent.url("hook"), "cronSchedule": "0 0 1 1 *"}},
            )
            hook = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
            await asyncio.sleep(1.5)  # both replicas have read the limit, and started
            for _ in range(DELIVERIES):
                await c.graphql(token, TRIGGER_WEBHOOK, {"id": hook})
                await asyncio.sleep(0.03)  # one notice each: both replicas take some
            for _ in range(300):
                if len([v for v in agent.visits if v.ended]) >= DELIVERIES:
                    break
                await asyncio.sleep(0.1)
            by_process: dict[int, list[Visit]] = defaultdict(list)
            owners = {
                port: name
                for name in ("dispatcher", "dispatcher-2")
                for port in ports_of(c.procs[name].pid)
            }
            for visit in agent.visits:
                by_process[owners[visit.port]].append(visit)  # type: ignore[index]
        assert len(agent.visits) == DELIVERIES
        assert peak(agent.visits) <= 2 * LIMIT
        assert all(peak(visits) <= LIMIT for visits in by_process.values()), by_process
        assert len(by_process) == 2  # both replicas sent some
        print(
            f"\ntwo replicas, limit {LIMIT}: peak {peak(agent.visits)} at the agent, "
            + ", ".join(f"{n}: {peak(v)}" for n, v in sorted(by_process.items()))  # type: ignore[type-var]
        )
    finally:
        await agent.stop()
