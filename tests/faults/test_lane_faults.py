"""DELAY and execution groups under kill -9 of the dispatcher and of the scheduler (part
of the fault suite): no waiting slot lost, none sent twice (only the one in flight at the
kill may be sent again, with the same id, as at-least-once allows), group order kept."""

from __future__ import annotations

import asyncio
import signal

import pytest

from cronhooks_common.settings import Settings
from tests.support.lanes import SlowAgent, admin, burst, create, settle, wait_requested
from tests.support.processes import Cluster, cluster

pytestmark = pytest.mark.faults


async def kill_9(c: Cluster, service: str) -> None:
    proc = c.procs.pop(service)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    await asyncio.sleep(0.5)
    await c.start(service)
    await c.wait_ready(service)


async def wait_calls(agent: SlowAgent, count: int) -> None:
    for _ in range(600):
        if len(agent.calls) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"only {len(agent.calls)} calls")


@pytest.mark.parametrize("service", ["dispatcher", "scheduler"])
async def test_a_group_survives_kill_9(service: str, settings: Settings) -> None:
    agent = await SlowAgent(seconds=1.0).start()
    try:
        async with cluster(settings) as c:
            token = await admin(c)
            hooks = [await create(c, token, agent.url, executionGroup="night") for _ in range(3)]
            last = await burst(settings.database_url, hooks, minutes=2)  # 9 deliveries
            slots = await wait_requested(settings.database_url, hooks, last, 9)
            ids = [r["delivery_id"] for r in slots]
            await wait_calls(agent, 2)  # one done, one in flight, seven waiting
            in_flight = {x.delivery_id for x in agent.calls if x.ended is None}
            await kill_9(c, service)
            got = await settle(settings.database_url, ids)
            assert all(t[-1] == "delivery.succeeded" for t in got.values()), got
            # (a slot of the next real minute may come too: only the burst is judged)
            received = [x.delivery_id for x in agent.calls if x.delivery_id in ids]
            assert sorted(set(received)) == sorted(ids)  # none lost
            twice = {d for d in received if received.count(d) > 1}
            assert twice <= in_flight, twice  # none sent twice but the one in flight
            assert agent.overlaps() == []
            rank = {r["delivery_id"]: i for i, r in enumerate(slots)}
            firsts = [x for x in agent.first_calls() if x.delivery_id in rank]
            order = [rank[x.delivery_id] for x in firsts[1:]]
            assert order == sorted(order)  # the waiting ones went in slot order
    finally:
        await agent.stop()


@pytest.mark.parametrize("service", ["dispatcher", "scheduler"])
async def test_a_delayed_slot_survives_kill_9(service: str, settings: Settings) -> None:
    agent = await SlowAgent(seconds=1.5).start()
    try:
        async with cluster(settings) as c:
            token = await admin(c)
            hook = await create(c, token, agent.url, concurrencyPolicy="DELAY")
            last = await burst(settings.database_url, [hook], minutes=2)  # 3 slots
            slots = await wait_requested(settings.database_url, [hook], last, 3)
            ids = [r["delivery_id"] for r in slots]
            await wait_calls(agent, 1)  # the first is in flight, one waits, one is skipped
            in_flight = {x.delivery_id for x in agent.calls if x.ended is None}
            await kill_9(c, service)
            got = await settle(settings.database_url, ids)
            sent = [d for d in ids if got[d][-1] == "delivery.succeeded"]
            assert len(sent) == 2 and sum(got[d][-1] == "delivery.skipped" for d in ids) == 1
            received = [x.delivery_id for x in agent.calls if x.delivery_id in ids]
            assert sorted(set(received)) == sorted(sent)
            twice = {d for d in received if received.count(d) > 1}
            assert twice <= in_flight, twice
            assert agent.overlaps() == []
    finally:
        await agent.stop()
