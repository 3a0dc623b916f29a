"""The README's examples run as written against the real services (the reference's are
run by test_reference_examples.py; the signature check by tests/unit/test_readme_receiver.py):

* every ```graphql block, in page order on a fresh system, answers without errors;
* "An agent in 20 lines" runs as a process (on a free port instead of its 8091), gets the
  webhook the README creates for it, and a delivery writes its note: the webhook's
  `writePatterns` allow what the agent writes.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import asyncpg

from cronhooks_common.clock import SystemClock
from cronhooks_common.settings import Settings
from tests.support.flows import finished, trigger
from tests.support.inprocess import admin_token, running
from tests.support.processes import free_port

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
GRAPHQL = re.findall(r"```graphql\n(.*?)```", README, re.S)
AGENT_PORT = "8091"


def section(heading: str) -> str:
    return README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


async def test_every_readme_graphql_example_answers_without_errors(settings: Settings) -> None:
    assert len(GRAPHQL) >= 10, "the examples were not found: did the README's format change?"
    async with running(settings, SystemClock(), ("admin-api", "importer")) as r:
        token = await admin_token(settings.database_url, "readme")
        failures = []
        for query in GRAPHQL:
            status, body = await r.graphql(token, query)
            if status != 200 or body.get("errors"):
                failures.append(f"{query.strip()[:80]}…\n  {status} {body}")
    assert not failures, "\n".join(failures)


async def test_the_readme_agent_writes_its_note_through_the_webhook_the_readme_creates(
    settings: Settings, tmp_path: Path
) -> None:
    text = section("An agent in 20 lines")
    [code] = re.findall(r"```python\n(.*?)```", text, re.S)
    [mutation] = re.findall(r"```graphql\n(.*?)```", text, re.S)
    assert f"port={AGENT_PORT}" in code and f":{AGENT_PORT}/webhook" in mutation
    assert "port=8090" not in code, "8090 is the demo agent's port"
    port = str(free_port())
    script = tmp_path / "agent.py"
    script.write_text(code.replace(f"port={AGENT_PORT}", f"port={port}"))
    async with running(settings, SystemClock(), ("admin-api", "dispatcher", "importer")) as r:
        token = await admin_token(settings.database_url, "readme")
        _, body = await r.graphql(token, mutation.replace(f":{AGENT_PORT}/", f":{port}/"))
        assert "errors" not in body, body
        created = body["data"]["createCronWebhook"]
        agent = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env={**os.environ, "WEBHOOK_SECRET": created["secret"]}
        )
        try:
            await _listening(int(port))
            delivery_id = await trigger(r, token, created["cronWebhook"]["id"])
            done = await finished(r, token, delivery_id, timeout=30)
            assert done["status"] == "success", done
        finally:
            agent.terminate()
            await agent.wait()
    conn = await asyncpg.connect(settings.database_url)
    try:
        content = await conn.fetchval(
            "select content from importer.notes where path = $1", f"digests/{delivery_id}.md"
        )
    finally:
        await conn.close()
    assert content and "Summarise the day" in content


async def _listening(port: int) -> None:
    for _ in range(200):  # until the process listens (it imports aiohttp first)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError("the README agent did not start listening")
