"""concurrencyPolicy DELAY and execution groups with the real processes (`cronhooks run`)
and a slow agent on loopback; the group also with two dispatcher processes."""

from __future__ import annotations

import pytest

from cronhooks_common.settings import Settings
from tests.support.lanes import SlowAgent, admin, burst, create, settle, wait_requested
from tests.support.processes import cluster

pytestmark = pytest.mark.e2e


async def test_delay_sends_one_waiting_slot_after_the_pending_one(settings: Settings) -> None:
    agent = await SlowAgent(seconds=1.0).start()
    try:
        async with cluster(settings) as c:
            token = await admin(c)
            hook = await create(c, token, agent.url, concurrencyPolicy="DELAY")
            last = await burst(settings.database_url, [hook], minutes=3)  # 4 slots at once
            slots = await wait_requested(settings.database_url, [hook], last, 4)
            ids = [r["delivery_id"] for r in slots]
            got = await settle(settings.database_url, ids)
            sent = [d for d in ids if got[d][-1] == "delivery.succeeded"]
            skipped = [d for d in ids if got[d][-1] == "delivery.skipped"]
            assert len(sent) == 2 and len(skipped) == 2, got
            waited = [d for d in sent if "delivery.released" in got[d]]
            assert len(waited) == 1  # one ran at once, one waited for it
            # (a slot of the next real minute may come too: only the burst is judged)
            assert [x.delivery_id for x in agent.first_calls() if x.delivery_id in ids] == [
                next(d for d in sent if d not in waited),
                waited[0],
            ]
            assert agent.overlaps() == []
    finally:
        await agent.stop()


async def test_a_group_runs_one_at_a_time_across_two_dispatchers(settings: Settings) -> None:
    agent = await SlowAgent(seconds=1.0).start()
    try:
        async with cluster(settings) as c:
            await c.start_replica("dispatcher", "dispatcher-2")
            token = await admin(c)
            hooks = [await create(c, token, agent.url, executionGroup="batch") for _ in range(3)]
            last = await burst(settings.database_url, hooks, minutes=2)  # 9 deliveries
            slots = await wait_requested(settings.database_url, hooks, last, 9)
            ids = [r["delivery_id"] for r in slots]
            got = await settle(settings.database_url, ids)
            assert all(t[-1] == "delivery.succeeded" for t in got.values()), got
            first = [x for x in agent.first_calls() if x.delivery_id in ids]
            assert sorted(x.delivery_id for x in first) == sorted(ids)
            assert agent.overlaps() == []
            # The first one ran as it came; the others waited and went in slot order.
            order = [(r["slot"], r["delivery_id"]) for r in slots]
            rank = {d: i for i, (_, d) in enumerate(order)}
            assert [rank[x.delivery_id] for x in first[1:]] == sorted(
                rank[x.delivery_id] for x in first[1:]
            )
    finally:
        await agent.stop()
