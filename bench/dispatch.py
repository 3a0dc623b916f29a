"""Trigger burst: N webhooks triggered together, against a plain aiohttp client.

cronhooks: N `triggerCronWebhook` mutations sent at once (64 at a time); per delivery,
trigger→receipt = when the agent received it − when its mutation was sent.
Ceiling: a plain aiohttp client POSTing the same N signed bodies to the same agent, with
the same concurrency the dispatcher uses, in the same run.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from bench.common import percentile, signed_delivery, table
from bench.harness import RecordingAgent, running_cluster
from cronhooks_common.signing import SecretKeys, generate_secret

CREATE = """mutation($i: CreateCronWebhookInput!) { createCronWebhook(input: $i)
  { cronWebhook { id } } }"""
TRIGGER = "mutation($id: Int!) { triggerCronWebhook(webhookId: $id) { deliveryId } }"


async def _bounded(n: int, limit: int, make):  # type: ignore[no-untyped-def]
    sem = asyncio.Semaphore(limit)

    async def one(i: int):  # type: ignore[no-untyped-def]
        async with sem:
            return await make(i)

    return await asyncio.gather(*(one(i) for i in range(n)))


async def raw_ceiling(agent: RecordingAgent, n: int, concurrency: int) -> dict[str, float]:
    keys = SecretKeys.of(generate_secret())
    agent.reset()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:
        sent: dict[int, float] = {}

        async def post(i: int) -> None:
            body, headers = signed_delivery(keys, i, "manual")
            sent[i] = time.time()
            async with http.post(agent.url, data=body, headers=headers) as resp:
                await resp.read()

        started = time.time()
        await _bounded(n, concurrency, post)
        elapsed = time.time() - started
    lags = [agent.received[i][0] - sent[i] for i in sent]
    return {"per_second": n / elapsed, "p50": percentile(lags, 50), "p99": percentile(lags, 99)}


async def trigger_burst(n: int = 1000) -> list[tuple[str, str]]:
    agent = await RecordingAgent().start()
    try:
        async with running_cluster() as cluster, aiohttp.ClientSession() as session:
            ids = []
            for _ in range(n):
                body = await cluster.graphql(
                    session,
                    CREATE,
                    {"i": {"url": agent.url, "cronSchedule": "0 0 1 1 *", "instruction": "bench"}},
                )
                ids.append(body["data"]["createCronWebhook"]["cronWebhook"]["id"])
            returned: dict[int, float] = {}

            async def fire(i: int) -> None:
                sent = time.time()
                body = await cluster.graphql(session, TRIGGER, {"id": ids[i]})
                returned[body["data"]["triggerCronWebhook"]["deliveryId"]] = sent

            started = time.time()
            await _bounded(n, 64, fire)
            await agent.wait_for(n, timeout=120)
            last = max(times[0] for times in agent.received.values())
            lags = [agent.received[d][0] - t for d, t in returned.items()]
            ours = {
                "per_second": n / (last - started),
                "p50": percentile(lags, 50),
                "p99": percentile(lags, 99),
            }
            duplicates = sum(len(t) - 1 for t in agent.received.values())
            ceiling = await raw_ceiling(agent, n, 256)
    finally:
        await agent.stop()
    rows = [
        [
            "cronhooks (trigger → agent)",
            n,
            f"{ours['per_second']:.0f}",
            f"{ours['p50'] * 1000:.0f}",
            f"{ours['p99'] * 1000:.0f}",
            duplicates,
        ],
        [
            "plain aiohttp client (ceiling)",
            n,
            f"{ceiling['per_second']:.0f}",
            f"{ceiling['p50'] * 1000:.0f}",
            f"{ceiling['p99'] * 1000:.0f}",
            0,
        ],
        [
            "ratio (ours / ceiling)",
            "",
            f"{ours['per_second'] / ceiling['per_second']:.2f}",
            "",
            "",
            "",
        ],
    ]
    return [
        (
            f"Trigger burst: {n} webhooks triggered together",
            table(["", "N", "deliveries/s", "p50 ms", "p99 ms", "agent duplicates"], rows),
        )
    ]
