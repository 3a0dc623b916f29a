"""The herd spread over 100 destinations (CONTRACT §17): N webhooks whose next slot is the
same instant, webhook i aiming at agent port i mod 100 (one agent process, 100 ports on
loopback), so each destination gets N/100 deliveries and its limit
(CRONHOOKS_DESTINATION_CONCURRENCY, default 100) is never what bounds the burst; the plain
herd (herd.py) aims everything at one destination, where it is.

The same figures as the herd (its tables, titled for 100 destinations): lag, makespan,
deliveries/s, where the time goes, CPU per process, exactly once; the ceiling posts the
same bodies round-robin over the 100 ports. The APScheduler peer posts to one of them (it
has no notion of destinations; its figures are the in-memory reference, as in the herd).
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from bench import cpu
from bench.common import CONCURRENCY, percentile, signed_delivery
from bench.harness import Cluster, running_cluster
from bench.herd import (
    CronhooksRun,
    HerdRun,
    apscheduler_burst,
    create_webhooks,
    herd_sections,
    measured_burst,
    received,
    shared_slot,
    start_agents,
)
from cronhooks_common.signing import SecretKeys, generate_secret

DESTINATIONS = 100


async def cronhooks_burst(
    cluster: Cluster, session: aiohttp.ClientSession, agents: list[str], n: int
) -> CronhooksRun:
    slot = shared_slot(n)
    schedule = f"{slot.minute} {slot.hour} {slot.day} {slot.month} *"
    share, extra = divmod(n, len(agents))
    for i, agent in enumerate(agents):
        count = share + (1 if i < extra else 0)
        if count:
            await create_webhooks(cluster, session, count, f"{agent}/hook", schedule)
    stats = agents[0]  # one process: any port answers for all
    return await measured_burst(cluster, session, stats, slot, n, f"destinations-{n}")


async def ceiling(session: aiohttp.ClientSession, agents: list[str], n: int) -> dict[str, float]:
    """The plain aiohttp client, posting round-robin over the ports (herd.ceiling's figures)."""
    await session.post(f"{agents[0]}/reset")
    keys = SecretKeys.of(generate_secret())
    sem = asyncio.Semaphore(CONCURRENCY)
    started = time.time()

    async def post(i: int) -> None:
        async with sem:
            body, headers = signed_delivery(keys, i, "schedule")
            url = f"{agents[i % len(agents)]}/hook"
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()

    cpu_before = cpu.own_ms()
    await asyncio.gather(*(post(i) for i in range(n)))
    client_ms = cpu.own_ms() - cpu_before
    got = await received(session, agents[0])
    last = max(t[0] for t in got.values())
    lags = [t[0] - started for t in got.values()]
    return {
        "makespan": last - started,
        "per_second": n / (last - started),
        "cpu_ms_per_post": client_ms / n,
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
    }


async def spread_herd(n: int, destinations: int = DESTINATIONS) -> HerdRun:
    """cronhooks, then the ceiling, then the peer: one agent process on `destinations`
    ports, the cluster up (and idle) for all three."""
    proc, agents = await start_agents(destinations)
    try:
        async with (
            running_cluster() as cluster,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session,
        ):
            ours = await cronhooks_burst(cluster, session, agents, n)
            limit = await ceiling(session, agents, n)
            peer = await apscheduler_burst(session, agents[0], n)
    finally:
        proc.terminate()
        await proc.wait()
    return HerdRun(n, 1, ours, limit, peer)


async def run(sizes: tuple[int, ...] = (10_000,)) -> list[tuple[str, str]]:
    """The herd's tables for N webhooks over 100 destinations, at each size."""
    runs = [await spread_herd(n) for n in sizes]
    return [
        (f"{title} — {DESTINATIONS} destinations", content)
        for title, content in herd_sections(runs)
    ]
