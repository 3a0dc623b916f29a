"""The real services as processes, driven over HTTP GraphQL, with a real agent on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time

import aiohttp
import pytest
from standardwebhooks.webhooks import Webhook

from cronhooks_common.settings import Settings
from tests.support.agent import Agent
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.processes import SERVICES, cluster

pytestmark = pytest.mark.e2e


async def test_create_and_trigger_over_graphql_reaches_the_agent(
    settings: Settings, agent: Agent
) -> None:
    async with cluster(settings) as c:
        async with aiohttp.ClientSession() as session:
            for service in SERVICES:
                async with session.get(f"{c.url(service)}/healthz") as r:
                    assert r.status == 200
                async with session.get(f"{c.url(service)}/readyz") as r:
                    assert r.status == 200 and (await r.json())["status"] == "ready"
                async with session.get(f"{c.url(service)}/metrics") as r:
                    assert r.status == 200
                    assert "cronhooks_relay_leader" in await r.text()

        token = await c.admin_token("e2e")
        created = await c.graphql(
            token,
            CREATE_WEBHOOK,
            {
                "input": {
                    "url": agent.url,
                    "cronSchedule": "0 9 * * *",
                    "instruction": "Generate a digest of the last day",
                }
            },
        )
        secret = created["data"]["createCronWebhook"]["secret"]
        hook_id = created["data"]["createCronWebhook"]["cronWebhook"]["id"]

        trigger = f"mutation {{ triggerCronWebhook(webhookId: {hook_id}) {{ deliveryId }} }}"
        answer = await c.graphql(token, trigger)
        returned_at = time.time()
        delivery_id = answer["data"]["triggerCronWebhook"]["deliveryId"]
        [got] = await agent.wait_for(1, timeout=10)
        latency = got.at - returned_at
        print(f"\ntrigger → agent: {latency * 1000:.0f} ms after the mutation returned")
        # Generous bound: this only catches a missing wake-up (a poll or a tick), not speed.
        assert latency < 5

        # Verified with the Standard Webhooks library, not with our code.
        payload = Webhook(secret).verify(got.raw, got.headers)
        assert payload["id"] == delivery_id
        assert payload["webhook_id"] == hook_id
        assert payload["trigger"] == "manual"
        assert payload["attempt"] == 1
        assert payload["version"] == 1
        assert payload["instruction"] == "Generate a digest of the last day"
        assert payload["response_schema"]["type"] == "object"
        assert "api_token" not in payload and "previous_error" not in payload
        headers = got.headers
        # trip2g's receiver check: the secret string's bytes, the raw body.
        expected = hmac.new(secret.encode(), got.raw, hashlib.sha256).hexdigest()
        assert headers["X-Webhook-Signature"] == f"sha256={expected}"
        assert headers["X-Webhook-ID"] == str(delivery_id)
        assert headers["X-Webhook-Attempt"] == "1"
        assert headers["Content-Type"] == "application/json"
        assert headers["User-Agent"] == "cronhooks/1.0"

        for _ in range(100):
            result = await c.graphql(
                token,
                f"""{{ cronWebhookDeliveries(cronWebhookId:
                {hook_id}) {{ id status responseStatus attempts {{ attempt }} }} }}""",
            )
            deliveries = result["data"]["cronWebhookDeliveries"]
            if deliveries and deliveries[0]["status"] == "success":
                break
            await asyncio.sleep(0.05)
        assert deliveries == [
            {
                "id": delivery_id,
                "status": "success",
                "responseStatus": 200,
                "attempts": [{"attempt": 1}],
            }
        ]

        # SIGTERM drains and exits 0.
        for service in SERVICES:
            assert await c.stop(service) == 0, service
