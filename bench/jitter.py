"""The jitter herd (CONTRACT §13): N webhooks due at one slot with `jitterSeconds: W`.

Each webhook's slot is sent at slot + its offset (cronhooks_common.jitter), so the herd
should leave as a flat stream over W seconds instead of one burst. Reported:

* lag after the offset, per delivery: agent receipt − (slot + offset), p50/p99/max — the
  scheduler's precision with jitter on (target: p99 < 1 s);
* the per-second send histogram (first receipts, by whole second after the slot): min,
  mean and max per second, and its coefficient of variation next to that of the offsets
  themselves (what a perfect sender would show: the hash's own unevenness);
* received, missing and duplicates, and that every `scheduled_for` is the slot.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from datetime import datetime

import aiohttp
import asyncpg

from bench.common import CONCURRENCY, percentile, table
from bench.harness import running_cluster
from bench.herd import (
    create_webhooks,
    ms,
    received,
    shared_slot,
    sleep_until,
    start_agent,
    wait_for_receipts,
)
from cronhooks_common.jitter import jitter_offset


async def _webhooks_of(dsn: str) -> dict[int, tuple[int, datetime]]:
    """delivery id → (webhook id, scheduled_for) of every first request."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("""
            select (data->>'delivery_id')::bigint id, (data->>'webhook_id')::bigint webhook_id,
                   (data->>'scheduled_for')::timestamptz slot
            from eventstore.events
            where type = 'delivery.requested' and (data->>'attempt')::int = 1""")
    finally:
        await conn.close()
    return {r["id"]: (r["webhook_id"], r["slot"]) for r in rows}


def _cv(per_second: Counter[int], seconds: int) -> float:
    counts = [per_second.get(s, 0) for s in range(seconds)]
    mean = statistics.fmean(counts)
    return statistics.pstdev(counts) / mean if mean else float("nan")


async def jitter_herd(n: int = 10_000, window: int = 60) -> list[tuple[str, str]]:
    proc, agent = await start_agent()
    try:
        async with (
            running_cluster() as cluster,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session,
        ):
            slot = shared_slot(n)
            schedule = f"{slot.minute} {slot.hour} {slot.day} {slot.month} *"
            await create_webhooks(
                cluster, session, n, f"{agent}/hook", schedule, jitterSeconds=window
            )
            await sleep_until(slot.timestamp() - 2)
            await session.post(f"{agent}/reset")
            await wait_for_receipts(session, agent, n, slot.timestamp() + window + 120)
            await asyncio.sleep(1.0)  # a late duplicate still counts
            got = await received(session, agent)
            requests = await _webhooks_of(cluster.dsn)
    finally:
        proc.terminate()
        await proc.wait()
    lags: list[float] = []
    sent: Counter[int] = Counter()
    ideal: Counter[int] = Counter()
    wrong_slot = 0
    for key, times in got.items():
        webhook_id, scheduled = requests[int(key)]
        wrong_slot += scheduled != slot
        offset = jitter_offset(webhook_id, window).total_seconds()
        lags.append(times[0] - (slot.timestamp() + offset))
        sent[int(times[0] - slot.timestamp())] += 1
        ideal[int(offset)] += 1
    per_second = [sent.get(s, 0) for s in range(window)]
    row = [
        n,
        window,
        len(got),
        n - len(got),
        sum(len(t) - 1 for t in got.values()),
        wrong_slot,
        *(ms(percentile(lags, q)) for q in (50, 99)),
        ms(max(lags)),
        min(per_second),
        f"{statistics.fmean(per_second):.0f}",
        max(per_second),
        f"{_cv(sent, window):.3f}",
        f"{_cv(ideal, window):.3f}",
        sum(c for s, c in sent.items() if s >= window),
    ]
    headers = [
        "N",
        "jitter s",
        "received",
        "missing",
        "duplicates",
        "scheduled_for ≠ slot",
        "p50 lag ms",
        "p99 lag ms",
        "max lag ms",
        "min/s",
        "mean/s",
        "max/s",
        "CV sent",
        "CV offsets",
        "sent after the window",
    ]
    title = (
        f"Jitter herd: {n} webhooks due at one slot with jitterSeconds {window}; lag = receipt"
        " − (slot + offset); per-second histogram of receipts over the window"
        f" (measured {time.strftime('%H:%MZ', time.gmtime())})"
    )
    return [(title, table(headers, [row]))]
