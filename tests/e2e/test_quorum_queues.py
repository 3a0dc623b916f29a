"""CRONHOOKS_QUEUE_TYPE=quorum (CONTRACT §12) on the local broker, with the services as
processes: every queue they declare is a quorum queue (as the management API reports it),
a delivery flows end to end, and a queue of the other type stops a service with one line."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any
from urllib.parse import quote

import aio_pika
import aiohttp
import pytest

from cronhooks_common.broker import DEAD_LETTER_EXCHANGE
from cronhooks_common.queues import declare
from cronhooks_common.settings import Settings
from tests.support import rabbit
from tests.support.agent import Agent
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.processes import cli, cluster, with_free_ports

pytestmark = pytest.mark.e2e

CONSUMERS = ("scheduler", "dispatcher", "importer")


async def queues_of(vhost: str) -> dict[str, dict[str, Any]]:
    async with (
        aiohttp.ClientSession(headers=rabbit.AUTH) as session,
        session.get(f"{rabbit.MANAGEMENT}/queues/{quote(vhost, safe='')}") as resp,
    ):
        assert resp.status == 200, await resp.text()
        return {q["name"]: q for q in await resp.json()}


async def delivery_status(c: Any, token: str, delivery_id: int) -> str | None:
    for _ in range(200):
        got = await c.graphql(token, f"{{ cronWebhookDelivery(id: {delivery_id}) {{ status }} }}")
        delivery = got["data"]["cronWebhookDelivery"]
        if delivery is not None and delivery["status"] != "pending":
            return str(delivery["status"])
        await asyncio.sleep(0.05)
    return None


async def test_with_quorum_every_queue_is_quorum_and_a_delivery_flows(
    settings: Settings, vhost: str, agent: Agent
) -> None:
    quorum = dataclasses.replace(settings, queue_type="quorum")
    async with cluster(quorum) as c:
        queues = await queues_of(vhost)
        expected = {f"cronhooks.{n}{end}" for n in CONSUMERS for end in ("", ".dead")}
        assert expected <= set(queues)
        ours = {name: q for name, q in queues.items() if name.startswith("cronhooks.")}
        assert {name: q["type"] for name, q in ours.items()} == dict.fromkeys(ours, "quorum")
        for name in CONSUMERS:
            args = queues[f"cronhooks.{name}"]["arguments"]
            assert args["x-dead-letter-strategy"] == "at-least-once"
            assert all(q["durable"] and not q["auto_delete"] for q in ours.values())

        token = await c.admin_token("q")
        created = await c.graphql(
            token, CREATE_WEBHOOK, {"input": {"url": agent.url, "cronSchedule": "0 9 * * *"}}
        )
        hook_id = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
        answer = await c.graphql(
            token, f"mutation {{ triggerCronWebhook(webhookId: {hook_id}) {{ deliveryId }} }}"
        )
        delivery_id = answer["data"]["triggerCronWebhook"]["deliveryId"]
        [got] = await agent.wait_for(1, timeout=15)
        assert got.body["id"] == delivery_id
        assert await delivery_status(c, token, delivery_id) == "success"


async def _declare_as_consumer_does(amqp_url: str, name: str, queue_type: str) -> None:
    """The queue as a service of the other setting left it."""
    conn = await aio_pika.connect(amqp_url)
    try:
        channel = await conn.channel()
        dead_letters = {
            "x-dead-letter-exchange": DEAD_LETTER_EXCHANGE,
            "x-dead-letter-routing-key": name,
        }
        await declare(channel, name, queue_type=queue_type, arguments=dead_letters)
    finally:
        await conn.close()


@pytest.mark.parametrize(("existing", "setting"), [("classic", "quorum"), ("quorum", "classic")])
async def test_a_queue_of_the_other_type_stops_the_service_with_one_line(
    settings: Settings, amqp_url: str, existing: str, setting: str
) -> None:
    await _declare_as_consumer_does(amqp_url, "cronhooks.scheduler", existing)
    env = with_free_ports(dataclasses.replace(settings, queue_type=setting))
    code, out, err = await cli(env, "run", "scheduler", timeout=60)
    text = out + err
    assert code == 2, text
    [line] = [line for line in text.splitlines() if "CRONHOOKS_QUEUE_TYPE" in line]
    assert f"'cronhooks.scheduler' is a {existing} queue but CRONHOOKS_QUEUE_TYPE={setting}" in line
    assert "Traceback" not in text
