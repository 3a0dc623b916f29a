"""The README's quick start: `cronhooks up --demo-agent --print-token` (what `make up` runs)
brings everything up and prints two curl commands; run as printed, they create a webhook
for the demo agent and trigger it, and the delivery succeeds with the demo agent's note."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import asyncpg

from cronhooks_common.settings import Settings
from tests.support.inprocess import eventually
from tests.support.processes import free_port, with_free_ports


async def _curl(command: str) -> dict:  # type: ignore[type-arg]
    proc = await asyncio.create_subprocess_shell(command, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0, command
    return json.loads(out)  # type: ignore[no-any-return]


async def test_the_printed_curls_create_and_run_a_webhook_for_the_demo_agent(
    settings: Settings,
) -> None:
    env = {**os.environ, **with_free_ports(settings)}
    up = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cronhooks_common.cli",
        "up",
        "--demo-agent",
        "--demo-agent-port",
        str(free_port()),
        "--print-token",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert up.stdout is not None
        curls: list[str] = []
        async with asyncio.timeout(90):
            while len(curls) < 2:
                line = (await up.stdout.readline()).decode()
                assert line, "cronhooks up ended before printing the quick start"
                if line.startswith("  curl "):
                    curls.append(line.strip())
        created = await _curl(curls[0])
        assert "errors" not in created, created
        assert created["data"]["createCronWebhook"]["secret"].startswith("whsec_")
        triggered = await _curl(curls[1])
        assert "errors" not in triggered, triggered

        async def delivery_done() -> str | None:
            body = await _curl(
                curls[1].replace(
                    "mutation { triggerCronWebhook(webhookId: 1) { deliveryId } }",
                    "{ cronWebhookDeliveries(cronWebhookId: 1) { status } }",
                )
            )
            statuses = [d["status"] for d in body["data"]["cronWebhookDeliveries"]]
            return statuses[0] if statuses and statuses[0] != "pending" else None

        assert await eventually(delivery_done, timeout=30, interval=0.2) == "success"
        conn = await asyncpg.connect(settings.database_url)
        try:
            assert (
                await conn.fetchval(
                    "select count(*) from importer.notes where path like 'demo/digest-%'"
                )
                == 1
            )
        finally:
            await conn.close()
    finally:
        up.send_signal(signal.SIGTERM)
        await asyncio.wait_for(up.wait(), 60)
