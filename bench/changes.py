"""Notes write → change delivery (CONTRACT §11): how long after a note batch commits its
change webhooks' agents hear of it, with 1 and 100 matching change webhooks, and with
10,000 change webhooks of which one matches (the matcher's prefix index at work). Also
the writes' own latency, which matching must not change (it runs after the commit).

Each push is one note through the token API with an API key (depth 0), one every 100 ms
(every second with 100 matching webhooks: each push is a burst of 100 deliveries, and the
figure is how long until all of them arrived, not how a saturated dispatcher queues); the lag of a delivery is its arrival at the agent minus the push's answer (which comes
after the commit): a lower bound by the answer's own trip, well under a millisecond on
loopback.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
from aiohttp import web

from bench.common import percentile, table
from bench.harness import running_cluster

PUSHES = 50
BURST_PUSHES = 20  # with 100 matching webhooks
CREATE = """mutation($i: CreateChangeWebhookInput!) {
  createChangeWebhook(input: $i) { changeWebhook { id } } }"""
CREATE_KEY = 'mutation { createApiKey(input: {name: "bench"}) { key } }'


class PathAgent:
    """Answers 200 at once; notes when each (webhook, path) arrived."""

    def __init__(self) -> None:
        self.arrived: dict[tuple[int, str], float] = {}
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> PathAgent:
        async def hook(request: web.Request) -> web.Response:
            at = time.time()
            body = await request.json()
            for change in body["changes"]:
                self.arrived.setdefault((int(body["webhook_id"]), change["path"]), at)
            return web.Response(status=200)

        app = web.Application(client_max_size=8 << 20)
        app.router.add_post("/hook", hook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def _create_hooks(cluster, session, patterns: list[str], url: str) -> list[int]:  # type: ignore[no-untyped-def]
    sem = asyncio.Semaphore(32)

    async def one(pattern: str) -> int:
        async with sem:
            body = await cluster.graphql(
                session, CREATE, {"i": {"url": url, "includePatterns": [pattern]}}
            )
            assert "errors" not in body, body
            return int(body["data"]["createChangeWebhook"]["changeWebhook"]["id"])

    return list(await asyncio.gather(*(one(p) for p in patterns)))


async def _scenario(  # type: ignore[no-untyped-def]
    cluster,
    session,
    agent: PathAgent,
    key: str,
    prefix: str,
    matching: list[int],
    pushes: int = PUSHES,
    every: float = 0.1,
) -> list[object]:
    url = f"{cluster.url('importer')}/api/notes"
    answered: dict[str, float] = {}
    write_ms: list[float] = []
    for i in range(pushes):
        path = f"{prefix}/{i}.md"
        started = time.time()
        async with session.post(
            url,
            json={"changes": [{"path": path, "content": f"note {i}"}]},
            headers={"X-API-Key": key},
        ) as resp:
            assert resp.status == 200, await resp.text()
        answered[path] = time.time()
        write_ms.append((answered[path] - started) * 1000)
        await asyncio.sleep(every)
    wanted = {(hook, path) for hook in matching for path in answered}
    deadline = time.time() + 60
    while not wanted <= agent.arrived.keys():
        assert time.time() < deadline, f"{len(wanted - agent.arrived.keys())} deliveries missing"
        await asyncio.sleep(0.05)
    lags = [(agent.arrived[k] - answered[k[1]]) * 1000 for k in wanted]
    return [
        len(matching),
        pushes,
        len(lags),
        f"{percentile(lags, 50):.0f}",
        f"{percentile(lags, 99):.0f}",
        f"{percentile(write_ms, 50):.1f}",
        f"{percentile(write_ms, 99):.1f}",
    ]


async def change_lag() -> list[tuple[str, str]]:
    agent = await PathAgent().start()
    rows: list[list[object]] = []
    try:
        async with running_cluster() as cluster, aiohttp.ClientSession() as session:
            created = await cluster.graphql(session, CREATE_KEY)
            key = created["data"]["createApiKey"]["key"]
            one = await _create_hooks(cluster, session, ["one/*"], agent.url)
            rows.append([*(await _scenario(cluster, session, agent, key, "one", one)), 1])
            hundred = await _create_hooks(cluster, session, ["many/*"] * 100, agent.url)
            burst = await _scenario(
                cluster, session, agent, key, "many", hundred, BURST_PUSHES, every=1.0
            )
            rows.append([*burst, 101])
            # 10,000 change webhooks in all, each watching a folder of its own: a write
            # to one folder matches one of them.
            await _create_hooks(
                cluster, session, [f"crowd/{i}/*" for i in range(1, 9_899)], agent.url
            )
            target = await _create_hooks(cluster, session, ["crowd/0/*"], agent.url)
            rows.append(
                [*(await _scenario(cluster, session, agent, key, "crowd/0", target)), 10_000]
            )
    finally:
        await agent.stop()
    return [
        (
            "Notes write → change delivery (one note per push, API key, depth 0)",
            table(
                [
                    "matching webhooks",
                    "pushes",
                    "deliveries",
                    "lag p50 ms",
                    "lag p99 ms",
                    "write p50 ms",
                    "write p99 ms",
                    "change webhooks in all",
                ],
                rows,
            ),
        )
    ]
