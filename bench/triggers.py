"""Fire lateness: 1,000 one-shot triggers armed for the same second.

An agent is registered, arms 1,000 jobs with the same `fire_at` (a whole second, far
enough ahead to arm them all), and records when each callback arrives. Lateness =
arrival − fire_at, per job."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import aiohttp
from aiohttp import web

from bench.common import percentile, table
from bench.harness import running_cluster

N = 1000
CREATE_AGENT = """mutation($i: CreateAgentInput!) { createAgent(input: $i) { accessToken } }"""


async def fire_lateness(n: int = N) -> list[tuple[str, str]]:
    arrivals: dict[str, float] = {}
    done = asyncio.Event()

    async def fire(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        arrivals.setdefault(body["job_id"], time.time())
        if len(arrivals) >= n:
            done.set()
        return web.json_response({"status": "accepted"}, status=202)

    app = web.Application()
    app.router.add_post("/api/cron/fire", fire)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    agent_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        async with running_cluster() as cluster, aiohttp.ClientSession() as session:
            body = await cluster.graphql(
                session, CREATE_AGENT, {"i": {"instanceId": "bench", "callbackUrl": agent_url}}
            )
            token = body["data"]["createAgent"]["accessToken"]
            fire_at = (datetime.now(UTC) + timedelta(seconds=20)).replace(microsecond=0)
            sem = asyncio.Semaphore(16)

            async def arm(i: int) -> None:
                async with (
                    sem,
                    session.post(
                        f"{cluster.url('admin-api')}/api/agent-cron/provision",
                        json={"job_id": f"job-{i}", "fire_at": fire_at.isoformat()},
                        headers={"Authorization": f"Bearer {token}"},
                    ) as resp,
                ):
                    assert resp.status == 200, await resp.text()

            armed_in = time.time()
            await asyncio.gather(*(arm(i) for i in range(n)))
            armed_in = time.time() - armed_in
            await asyncio.wait_for(done.wait(), timeout=120)
    finally:
        await runner.cleanup()
    lateness = [(at - fire_at.timestamp()) * 1000 for at in arrivals.values()]
    rows = [
        [
            n,
            f"{armed_in:.1f}",
            f"{percentile(lateness, 50):.0f}",
            f"{percentile(lateness, 99):.0f}",
            f"{max(lateness):.0f}",
            f"{min(lateness):.0f}",
        ]
    ]
    return [
        (
            "One-shot triggers: 1,000 armed for the same second",
            table(
                ["triggers", "arming took s", "p50 late ms", "p99 late ms", "max ms", "min ms"],
                rows,
            ),
        )
    ]
