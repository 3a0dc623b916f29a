"""kill -9 of a dispatcher while a destination is held (CONTRACT §17, part of the fault
suite): the hold is a row in Postgres, so the other replica, which gets the killed one's
deliveries back, keeps them waiting until the hold ends; none is lost."""

from __future__ import annotations

import asyncio
import signal
from datetime import datetime

import asyncpg
import pytest

from cronhooks_common.settings import Settings
from tests.support.destinations import TimingAgent
from tests.support.graphql import CREATE_WEBHOOK, TRIGGER_WEBHOOK
from tests.support.processes import Cluster, cluster

pytestmark = pytest.mark.faults

HOLD_SECONDS = 6
WAITING = 12


async def create(c: Cluster, token: str, url: str) -> int:
    body = await c.graphql(
        token, CREATE_WEBHOOK, {"input": {"url": url, "cronSchedule": "0 0 1 1 *"}}
    )
    return int(body["data"]["createCronWebhook"]["cronWebhook"]["id"])


async def test_a_hold_outlives_the_dispatcher_that_got_it(settings: Settings) -> None:
    agent = await TimingAgent(seconds=0.05, answers={"busy": [429]}).start()
    agent.retry_after = str(HOLD_SECONDS)
    try:
        async with cluster(settings) as c:
            await c.start_replica("dispatcher", "dispatcher-2")
            await asyncio.sleep(1.5)  # the replica has started consuming
            token = await c.admin_token("hold")
            busy = await create(c, token, agent.url("busy"))
            same = await create(c, token, agent.url("same"))
            await c.graphql(token, TRIGGER_WEBHOOK, {"id": busy})
            held_until = await _held_until(settings.database_url)
            await asyncio.sleep(1.0)  # the other replica reads holds every half second
            ids = []
            for _ in range(WAITING):
                body = await c.graphql(token, TRIGGER_WEBHOOK, {"id": same})
                ids.append(body["data"]["triggerCronWebhook"]["deliveryId"])
                await asyncio.sleep(0.03)  # one notice each: both replicas hold some
            await asyncio.sleep(1.0)
            assert agent.at("same") == []

            killed = c.procs.pop("dispatcher")
            killed.send_signal(signal.SIGKILL)
            await killed.wait()  # its unacked deliveries go back to the queue: dispatcher-2's

            statuses = await _settle(c, token, ids, timeout=HOLD_SECONDS + 30)
            assert set(statuses.values()) == {"success"}, statuses
        got = agent.at("same")
        assert got  # delivered
        assert min(v.started for v in got) >= held_until.timestamp() - 0.05
        assert len(got) >= WAITING  # all of them (a repeat is allowed: at least once)
        print(
            f"\nkill -9 of a dispatcher during a {HOLD_SECONDS} s hold: {len(got)} requests for "
            f"{WAITING} waiting deliveries, the first {min(v.started for v in got) - held_until.timestamp():.2f} s "
            "after the hold's end; none lost"
        )
    finally:
        await agent.stop()


async def _held_until(dsn: str) -> datetime:
    conn = await asyncpg.connect(dsn)
    try:
        for _ in range(200):
            until = await conn.fetchval("select held_until from shared.destination_holds")
            if until is not None:
                return until  # type: ignore[no-any-return]
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError("no hold was written")


async def _settle(c: Cluster, token: str, ids: list[int], timeout: float) -> dict[int, str]:
    statuses: dict[int, str] = {}
    for _ in range(int(timeout * 10)):
        statuses = {}
        for delivery_id in ids:
            body = await c.graphql(
                token, f"{{ cronWebhookDelivery(id: {delivery_id}) {{ status }} }}"
            )
            statuses[delivery_id] = body["data"]["cronWebhookDelivery"]["status"]
        if set(statuses.values()) == {"success"}:
            break
        await asyncio.sleep(0.1)
    return statuses
