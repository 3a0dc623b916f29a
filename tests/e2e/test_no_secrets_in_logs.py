"""No secret, token or GraphQL source text with literals is logged (CONTRACT §15): the real
services as processes do everything that shows a credential — webhook secrets (generated,
given, replaced, regenerated, and one inline in a refused mutation), api_tokens used over
REST and GraphQL, an agent's access token, fire JWTs, the admin token — and then every line
they logged is searched for every one of them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.processes import SERVICES, cluster, service_log

pytestmark = pytest.mark.e2e


def log_sizes() -> dict[str, int]:
    return {
        name: service_log(name).stat().st_size if service_log(name).exists() else 0
        for name in SERVICES
    }


def logged_since(sizes: dict[str, int]) -> str:
    text = []
    for name, offset in sizes.items():
        path: Path = service_log(name)
        with path.open("rb") as log:
            log.seek(offset)
            text.append(log.read().decode("utf-8", "replace"))
    return "\n".join(text)


async def test_no_service_logs_a_secret_or_a_token(settings: Settings) -> None:
    seen: dict[str, str] = {}
    tokens: list[str] = []

    async def accept(_: web.Request, entry: Received) -> web.StreamResponse:
        body = entry.body
        if "api_token" in body:
            tokens.append(body["api_token"])
        return web.json_response({"status": "accepted"}, status=202)

    async def fire(request: web.Request, _: Received) -> web.StreamResponse:
        seen[f"fire jwt {len(seen)}"] = request.headers["Authorization"].removeprefix("Bearer ")
        return web.json_response({"status": "accepted"}, status=202)

    agent = await Agent().start()
    sizes = log_sizes()
    try:
        async with cluster(settings) as c:
            admin = await c.admin_token("logs")
            seen["admin token"] = admin
            url = agent.url_for("hook", accept)
            given = "an admin's own secret, 24+ characters long"
            created = await c.graphql(
                admin,
                CREATE_WEBHOOK,
                {
                    "input": {
                        "url": url,
                        "cronSchedule": "0 9 * * *",
                        "secret": given,
                        "passApiKey": True,
                        "writePatterns": ["logs/*"],
                    }
                },
            )
            hook_id = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
            seen["given secret"] = given
            generated = await c.graphql(
                admin, CREATE_WEBHOOK, {"input": {"url": url, "cronSchedule": "0 9 * * *"}}
            )
            seen["generated secret"] = generated["data"]["createCronWebhook"]["secret"]
            inline = "an inline secret in a refused mutation 42"
            refused = await c.graphql(
                admin,
                # graphql-core's own message for this one quotes the whole input literal
                f'mutation {{ createCronWebhook(input: {{url: "{url}", secret: "{inline}"}})'
                " { secret } }",
            )
            assert refused["errors"][0]["extensions"]["field"] == "cronSchedule"
            seen["inline secret"] = inline
            replaced = "a replacement secret, 24+ characters"
            await c.graphql(
                admin,
                "mutation($i: UpdateCronWebhookInput!) { updateCronWebhook(input: $i) {"
                " cronWebhook { id } } }",
                {"i": {"id": hook_id, "secret": replaced}},
            )
            seen["replaced secret"] = replaced
            regenerated = await c.graphql(
                admin, f"mutation {{ regenerateCronWebhookSecret(id: {hook_id}) {{ secret }} }}"
            )
            seen["regenerated secret"] = regenerated["data"]["regenerateCronWebhookSecret"][
                "secret"
            ]

            await c.graphql(
                admin, f"mutation {{ triggerCronWebhook(webhookId: {hook_id}) {{ deliveryId }} }}"
            )
            await agent.wait_for(1, name="hook", timeout=15)
            [api_token] = tokens
            seen["api_token"] = api_token
            async with aiohttp.ClientSession() as session:
                auth = {"Authorization": f"Bearer {api_token}"}
                importer = c.url("importer")
                async with session.post(
                    f"{importer}/api/notes",
                    headers=auth,
                    json={"changes": [{"path": "logs/a.md", "content": "a"}]},
                ) as resp:
                    assert resp.status == 200
                async with session.post(  # refused: outside the write patterns
                    f"{importer}/api/notes",
                    headers=auth,
                    json={"changes": [{"path": "elsewhere.md", "content": "x"}]},
                ) as resp:
                    assert resp.status == 403
                async with session.post(
                    f"{importer}/graphql",
                    headers=auth,
                    json={
                        "query": 'mutation { pushNotes(input: {updates: [{path: "logs/b.md",'
                        ' content: "b"}]}) { __typename } }'
                    },
                ) as resp:
                    assert resp.status == 200

                created_agent = await c.graphql(
                    admin,
                    'mutation { createAgent(input: {instanceId: "logs", callbackUrl: "'
                    + f"http://127.0.0.1:{agent.port}"
                    + '"}) { accessToken } }',
                )
                access = created_agent["data"]["createAgent"]["accessToken"]
                seen["agent access token"] = access
                agent.url_for("api/cron/fire", fire)
                async with session.post(
                    f"{c.url('admin-api')}/api/agent-cron/provision",
                    headers={"Authorization": f"Bearer {access}"},
                    json={"job_id": "now", "fire_at": datetime.now(UTC).isoformat()},
                ) as resp:
                    assert resp.status == 200
            await agent.wait_for(1, name="api/cron/fire", timeout=15)
            await asyncio.sleep(0.5)  # let the services log what follows
    finally:
        await agent.stop()
    logged = logged_since(sizes)  # the services have stopped: every line is written
    assert (
        "delivery_attempted" in logged and "trigger_attempted" in logged
    )  # we read the right logs
    leaked = [what for what, value in seen.items() if value in logged]
    assert leaked == [], f"logged: {leaked}"
    assert settings.secret_key not in logged
