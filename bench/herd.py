"""The herd: N webhooks whose next slot is the same instant, against a raw ceiling.

For each delivery, lag = agent receipt − slot. Also: makespan (slot → last receipt),
deliveries/s, duplicates and missing, and where the time goes (slot → requested →
first POST, from the event store). In the same run, the ceiling: a plain aiohttp client
posting the same N signed bodies to the same agent process with the same concurrency.
The agent is a separate process (bench/agent.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg

from bench import cpu
from bench.common import CONCURRENCY, percentile, signed_delivery, table
from bench.harness import free_port, running_cluster
from cronhooks_common.signing import SecretKeys, generate_secret

CREATE = """mutation($i: CreateCronWebhookInput!) { createCronWebhook(input: $i) { cronWebhook { id } } }"""


async def start_agent() -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.agent", str(port), env={**os.environ}
    )
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(100):
            try:
                async with session.get(f"{url}/stats") as resp:
                    if resp.status == 200:
                        return proc, url
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    raise RuntimeError("bench agent did not start")


async def received(session: aiohttp.ClientSession, url: str) -> dict[str, list[float]]:
    async with session.get(f"{url}/stats") as resp:
        return (await resp.json())["received"]  # type: ignore[no-any-return]


async def ceiling(session: aiohttp.ClientSession, agent: str, n: int) -> dict[str, float]:
    await session.post(f"{agent}/reset")
    keys = SecretKeys.of(generate_secret())
    sem = asyncio.Semaphore(CONCURRENCY)
    started = time.time()

    async def post(i: int) -> None:
        async with sem:
            body, headers = signed_delivery(keys, i, "schedule")
            async with session.post(f"{agent}/hook", data=body, headers=headers) as resp:
                await resp.read()

    await asyncio.gather(*(post(i) for i in range(n)))
    got = await received(session, agent)
    last = max(t[0] for t in got.values())
    lags = [t[0] - started for t in got.values()]
    return {
        "makespan": last - started,
        "per_second": n / (last - started),
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
    }


async def create_webhooks(
    cluster,
    session: aiohttp.ClientSession,
    n: int,
    url: str,  # type: ignore[no-untyped-def]
    schedule: str,
) -> None:
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            body = await cluster.graphql(
                session,
                CREATE,
                {
                    "i": {
                        "url": url,
                        "cronSchedule": schedule,
                        "instruction": f"bench {i}",
                        "misfireGraceSeconds": 600,
                    }
                },
            )
            assert "errors" not in body, body

    await asyncio.gather(*(one(i) for i in range(n)))


async def breakdown(dsn: str) -> dict[str, float]:
    """Median stage times from the event store: slot → requested → first POST started."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("""
            with r as (
                select (data->>'delivery_id')::bigint id, (data->>'scheduled_for')::timestamptz slot,
                       recorded_at from eventstore.events where type = 'delivery.requested'),
            d as (
                select (data->>'delivery_id')::bigint id, (data->>'started_at')::timestamptz started,
                       recorded_at from eventstore.events where type = 'delivery.succeeded')
            select percentile_cont(0.5) within group (order by extract(epoch from r.recorded_at - r.slot)) requested,
                   percentile_cont(0.99) within group (order by extract(epoch from r.recorded_at - r.slot)) requested99,
                   percentile_cont(0.5) within group (order by extract(epoch from d.started - r.slot)) started,
                   percentile_cont(0.99) within group (order by extract(epoch from d.started - r.slot)) started99,
                   percentile_cont(0.5) within group (order by extract(epoch from d.recorded_at - r.slot)) recorded
            from r join d using (id)""")
        return {k: float(v or 0) * 1000 for k, v in dict(row).items()}
    finally:
        await conn.close()


async def herd(
    n: int,
) -> tuple[list[object], dict[str, float], dict[str, float], dict[str, float]]:
    proc, agent = await start_agent()
    try:
        async with (
            running_cluster() as cluster,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session,
        ):
            # One slot for all: a whole minute far enough ahead to create them all first.
            lead = timedelta(seconds=70 + n * 0.012)
            slot = (datetime.now(UTC) + lead).replace(second=0, microsecond=0) + timedelta(
                minutes=1
            )
            schedule = f"{slot.minute} {slot.hour} {slot.day} {slot.month} *"
            await create_webhooks(cluster, session, n, f"{agent}/hook", schedule)
            await asyncio.sleep(max(0.0, (slot - datetime.now(UTC)).total_seconds() - 2))
            await session.post(f"{agent}/reset")
            cpu_before = cpu.snapshot()
            deadline = slot.timestamp() + 120
            while time.time() < deadline:
                got = await received(session, agent)
                if len(got) >= n:
                    break
                await asyncio.sleep(0.25)
            cpu_spent = cpu.spent_ms(cpu_before, cpu.snapshot())
            await asyncio.sleep(1.0)
            got = await received(session, agent)
            stages = await breakdown(cluster.dsn)
            limit = await ceiling(session, agent, n)
    finally:
        proc.terminate()
        await proc.wait()
    lags = [times[0] - slot.timestamp() for times in got.values()]
    duplicates = sum(len(t) - 1 for t in got.values())
    makespan = max(lags) if lags else float("nan")
    ours_rate = len(got) / makespan if lags else 0.0
    row = [
        n,
        f"{percentile(lags, 50) * 1000:.0f}",
        f"{percentile(lags, 95) * 1000:.0f}",
        f"{percentile(lags, 99) * 1000:.0f}",
        f"{makespan * 1000:.0f}",
        f"{ours_rate:.0f}",
        duplicates,
        n - len(got),
        f"{limit['per_second']:.0f}",
        f"{ours_rate / limit['per_second']:.2f}",
    ]
    return row, stages, limit, cpu_spent


async def steady(n: int, minutes: int = 2) -> list[object]:
    """Steady load: N webhooks every minute (`* * * * *`) for a few minutes; lag of every
    delivery after the first minute (warm caches, keep-alive connections).

    Cron is minute-granular (CONTRACT §2), so a steady load of cron webhooks is a steady
    rate of minute slots: N deliveries due at every minute boundary, minute after minute."""
    proc, agent = await start_agent()
    try:
        async with (
            running_cluster() as cluster,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session,
        ):
            await create_webhooks(cluster, session, n, f"{agent}/hook", "* * * * *")
            first = (datetime.now(UTC) + timedelta(minutes=1)).replace(second=0, microsecond=0)
            slots = [first + timedelta(minutes=i) for i in range(1, minutes + 1)]
            await asyncio.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds() + 20))
            await session.post(f"{agent}/reset")  # from here on: the measured minutes
            await asyncio.sleep(max(0.0, (slots[-1] - datetime.now(UTC)).total_seconds() + 30))
            got = await received(session, agent)
    finally:
        proc.terminate()
        await proc.wait()
    lags = []
    for times in got.values():
        for at in times:
            slot = max(s for s in slots if s.timestamp() <= at + 0.5)
            lags.append(at - slot.timestamp())
    expected = n * minutes
    return [
        n,
        minutes,
        len(lags),
        expected - len(lags),
        f"{percentile(lags, 50) * 1000:.0f}",
        f"{percentile(lags, 99) * 1000:.0f}",
        f"{max(lags) * 1000:.0f}",
    ]


async def run(
    sizes: tuple[int, ...] = (1_000, 10_000), steady_sizes: tuple[int, ...] = (100, 1_000)
) -> list[tuple[str, str]]:
    rows, stage_rows, cpu_rows = [], [], []
    steady_rows = [await steady(n) for n in steady_sizes]
    for n in sizes:
        row, stages, _, spent = await herd(n)
        rows.append(row)
        cpu_rows.append(
            [n, *(f"{spent[role]:.0f}" for role in cpu.ROLES), f"{sum(spent.values()) / n:.2f}"]
        )
        stage_rows.append(
            [
                n,
                f"{stages['requested']:.0f}",
                f"{stages['requested99']:.0f}",
                f"{stages['started']:.0f}",
                f"{stages['started99']:.0f}",
                f"{stages['recorded']:.0f}",
            ]
        )
    return [
        (
            "Herd: N webhooks, one slot (lag = agent receipt − slot)",
            table(
                [
                    "N",
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "makespan ms",
                    "deliveries/s",
                    "duplicates",
                    "missing",
                    "ceiling /s (plain aiohttp)",
                    "ratio",
                ],
                rows,
            ),
        ),
        (
            "Herd: where the time goes (ms after the slot, from the event store)",
            table(
                [
                    "N",
                    "requested p50",
                    "requested p99",
                    "POST started p50",
                    "POST started p99",
                    "outcome recorded p50",
                ],
                stage_rows,
            ),
        ),
        (
            "Herd: CPU ms per process, from 2 s before the slot to the last receipt (/proc)",
            table(["N", *cpu.ROLES, "all, per delivery"], cpu_rows),
        ),
        (
            "Steady load: N webhooks every minute, lag of every delivery after a warm-up minute",
            table(
                ["N", "minutes", "deliveries", "missing", "p50 ms", "p99 ms", "max ms"],
                steady_rows,
            ),
        ),
    ]
