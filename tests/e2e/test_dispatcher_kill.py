"""kill -9 of the dispatcher with 200 deliveries in flight: after a restart every delivery
id still reaches the agent and every delivery ends in success (at least once)."""

from __future__ import annotations

import asyncio
import dataclasses
import signal

import pytest
from aiohttp import web

from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.graphql import CREATE_WEBHOOK, TRIGGER_WEBHOOK
from tests.support.processes import cluster

pytestmark = pytest.mark.e2e
IN_FLIGHT = 200


async def test_kill_9_with_deliveries_in_flight_loses_none(settings: Settings) -> None:
    hold = asyncio.Event()

    async def answer(_: web.Request, __: Received) -> web.StreamResponse:
        await hold.wait()  # the first 200 are held until the dispatcher has been killed
        return web.Response(status=200)

    agent = await Agent(responder=answer).start()
    try:
        # All 200 in flight at the one agent: its destination's limit (CONTRACT §17) allows it.
        async with cluster(dataclasses.replace(settings, destination_concurrency=IN_FLIGHT)) as c:
            token = await c.admin_token("kill")
            created = await c.graphql(
                token,
                CREATE_WEBHOOK,
                {"input": {"url": agent.url, "cronSchedule": "0 0 1 1 *", "timeoutSeconds": 900}},
            )
            hook_id = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
            ids = set()
            for _ in range(IN_FLIGHT):
                body = await c.graphql(token, TRIGGER_WEBHOOK, {"id": hook_id})
                ids.add(body["data"]["triggerCronWebhook"]["deliveryId"])
            await agent.wait_for(IN_FLIGHT, timeout=30)
            assert {r.body["id"] for r in agent.received} == ids  # all 200 are in flight

            c.procs["dispatcher"].send_signal(signal.SIGKILL)
            assert await c.procs["dispatcher"].wait() == -signal.SIGKILL
            c.procs.pop("dispatcher")
            hold.set()
            before = len(agent.received)
            await c.start("dispatcher")
            await c.wait_ready("dispatcher")

            for _ in range(600):
                body = await c.graphql(
                    token,
                    f"""{{ cronWebhookDeliveries(
                    cronWebhookId: {hook_id}, limit: 500) {{ id status }} }}""",
                )
                statuses = {d["id"]: d["status"] for d in body["data"]["cronWebhookDeliveries"]}
                if set(statuses) == ids and set(statuses.values()) == {"success"}:
                    break
                await asyncio.sleep(0.1)
            assert set(statuses) == ids and set(statuses.values()) == {"success"}, statuses
            again = [r.body["id"] for r in agent.received[before:]]
            assert set(again) == ids  # every unfinished delivery was sent again, same id
            assert {r.body["attempt"] for r in agent.received} == {1}
            print(
                f"\nkill -9 with {IN_FLIGHT} in flight: {len(agent.received)} requests at the "
                f"agent for {len(ids)} deliveries ({len(agent.received) - len(ids)} repeats, "
                "allowed: at least once); all succeeded"
            )
    finally:
        await agent.stop()
