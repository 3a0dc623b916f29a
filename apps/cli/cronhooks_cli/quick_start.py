"""What `cronhooks up --print-token` (so `make up`) does once the services are ready: keep
one admin token, make sure the demo agent has its webhook, and print what to run next —
for what exists, with commands that work from where the user is."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from cronhooks_common.settings import Settings

# `make up` keeps the admin token it made here (mode 0600, beside .env) and reuses it while
# it is live, instead of minting another non-expiring token at every start.
TOKEN_FILE = Path(".cronhooks-admin-token")

# How `make up` recognises the webhook it made for the demo agent on an earlier run.
DEMO_DESCRIPTION = "demo agent of make up"


async def quick_start_token(settings: Settings, path: Path = TOKEN_FILE) -> str:
    """The token of earlier `make up` runs if it is still live, else a new one (saved)."""
    import asyncpg

    from cronhooks_admin.auth import create_token, token_is_live

    saved = _saved_token(path)
    conn = await asyncpg.connect(settings.database_url)
    try:
        if saved and await token_is_live(conn, saved, now=datetime.now(UTC)):
            return saved
        token = await create_token(conn, "make-up")
    finally:
        await conn.close()
    _save_token(path, token)
    return token


def _saved_token(path: Path) -> str:
    return path.read_text().strip() if path.is_file() else ""


def _save_token(path: Path, token: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    os.chmod(path, 0o600)  # also when the file was there before with wider permissions


def cli_command() -> str:
    """How to call the `cronhooks` script from the current directory: `cronhooks` only when
    it is on PATH; else the venv's script by its relative path (`.venv/bin/cronhooks`)."""
    script = Path(sys.executable).parent / "cronhooks"
    on_path = shutil.which("cronhooks")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "cronhooks"
    try:
        return os.path.relpath(script)
    except ValueError:  # another drive (Windows)
        return str(script)


class QuickStartError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class DemoWebhook:
    id: int
    created: bool
    delivery_id: int | None  # the delivery `make up` triggered when it created the webhook


async def _graphql(url: str, token: str, query: str, variables: dict[str, Any]) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url,
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {token}"},
        ) as resp,
    ):
        body = await resp.json()
    if body.get("errors"):
        raise QuickStartError(f"admin-api answered {body['errors'][0].get('message')}")
    return body["data"]


async def ensure_demo_webhook(
    graphql_url: str, token: str, *, agent_url: str, secret: str
) -> DemoWebhook:
    """The demo agent's webhook: the one an earlier run made, else a new one (every five
    minutes, with the demo agent's secret), run once at once so a first `make up` ends
    with a delivered webhook."""
    data = await _graphql(graphql_url, token, "{ cronWebhooks { id url description } }", {})
    for hook in sorted(data["cronWebhooks"], key=lambda h: h["id"]):
        if hook["url"] == agent_url and hook["description"] == DEMO_DESCRIPTION:
            return DemoWebhook(hook["id"], created=False, delivery_id=None)
    created = await _graphql(
        graphql_url,
        token,
        "mutation ($input: CreateCronWebhookInput!) {"
        " createCronWebhook(input: $input) { cronWebhook { id } } }",
        {
            "input": {
                "url": agent_url,
                "cronSchedule": "*/5 * * * *",
                "instruction": "Write a digest of the last day",
                "secret": secret,
                "description": DEMO_DESCRIPTION,
                # The demo agent answers with a note under demo/: let the webhook write there.
                "writePatterns": ["demo/*"],
            }
        },
    )
    webhook_id = int(created["createCronWebhook"]["cronWebhook"]["id"])
    triggered = await _graphql(
        graphql_url,
        token,
        "mutation ($id: Int!) { triggerCronWebhook(webhookId: $id) { deliveryId } }",
        {"id": webhook_id},
    )
    return DemoWebhook(
        webhook_id, created=True, delivery_id=triggered["triggerCronWebhook"]["deliveryId"]
    )


def curl(graphql_url: str, token: str, query: str) -> str:
    """A curl line that posts `query` as printed (shell-quoted for sh and bash)."""
    body = json.dumps({"query": query})
    return (
        f"  curl -s {graphql_url} -H 'Authorization: Bearer {token}' "
        f"-H 'Content-Type: application/json' -d '{body}'"
    )


def quick_start_text(
    settings: Settings,
    *,
    token: str,
    agent_url: str | None,
    agent_secret: str | None,
    demo: DemoWebhook | None,
    log_file: Path | None = None,
) -> str:
    """The quick start. Every URL on a line of its own opens in a browser (agents get the
    note API's URL in each delivery, so it is not listed)."""
    graphql = f"{settings.public_url}/graphql"
    cli = cli_command()
    lines = [
        "",
        "cronhooks is up.",
        f"  Admin web page:                  {settings.public_url}/",
        f"  GraphQL explorer:                {graphql}",
        f"  Admin token:                     {token}",
        f"  (kept in {TOKEN_FILE}; another: {cli} admin create-token --name you)",
    ]
    if log_file is not None:
        lines.append(f"  Logs (migrations, services):     {log_file}")
    if agent_url and agent_secret:
        received = agent_url.removesuffix("/webhook") + "/received"
        lines += [
            f"  What the demo agent received:    {received}",
            f"  Demo agent's secret:             {agent_secret}",
            "  (it refuses requests not signed with it: give it to webhooks you point there,",
            '   with writePatterns: ["demo/*"] for the note it writes, as below)',
        ]
    if demo is not None:
        state = (
            f"created and run once (delivery {demo.delivery_id})"
            if demo.created
            else "made by an earlier `make up`"
        )
        lines += [
            "",
            f"Demo webhook {demo.id}, every 5 minutes to the demo agent: {state}.",
            "Run it now:",
            curl(graphql, token, f"mutation {{ triggerCronWebhook(webhookId: {demo.id}) "
                 "{ deliveryId } }"),
            "Its deliveries:",
            curl(graphql, token, f"{{ cronWebhookDeliveries(cronWebhookId: {demo.id}) "
                 "{ id status trigger responseStatus error } }"),
        ]
    target = agent_url or "https://agent.example/webhook"
    secret = f', secret: "{agent_secret}"' if agent_url and agent_secret else ""
    lines += [
        "",
        "Create a webhook (its id and secret are in the answer):",
        curl(
            graphql,
            token,
            f'mutation {{ createCronWebhook(input: {{url: "{target}", '
            f'cronSchedule: "0 9 * * *", instruction: "Write a digest of the last day", '
            f'writePatterns: ["demo/*"]{secret}}}) {{ cronWebhook {{ id nextRunAt }} secret }} }}',
        ),
        "",
        "Stop: Ctrl-C here (`make down` also stops the servers `make up` started).",
        "",
    ]
    return "\n".join(lines)
