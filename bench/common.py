"""Shared bench plumbing: a throwaway database, timing helpers, the markdown report."""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from cronhooks_common.migrate import migrate
from cronhooks_common.signing import SecretKeys, signature_headers
from cronhooks_dispatcher.payload import RESPONSE_SCHEMA

PG_SERVER = "postgresql://127.0.0.1:5432"
RESULTS = Path(__file__).parent / "results"
# Requests in flight at once towards the agent: the dispatcher's default
# (dispatch_concurrency, per process), and so the limit of every client it is compared
# with (the plain-aiohttp ceiling, the APScheduler peer).
CONCURRENCY = 256


def signed_delivery(keys: SecretKeys, i: int, trigger: str) -> tuple[bytes, dict[str, str]]:
    """A delivery body shaped like the dispatcher's, signed with both header sets: what
    the plain-aiohttp ceilings post."""
    stamp = int(time.time())
    body = json.dumps(
        {
            "version": 1,
            "id": i,
            "webhook_id": i,
            "timestamp": stamp,
            "scheduled_for": None,
            "trigger": trigger,
            "attempt": 1,
            "missed_count": 0,
            "instruction": "bench",
            "response_schema": RESPONSE_SCHEMA,
        }
    ).encode()
    return body, signature_headers(keys, delivery_id=str(i), timestamp=stamp, body=body, attempt=1)


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    name = f"cronhooks_bench_{uuid.uuid4().hex[:8]}"
    dsn = f"{PG_SERVER}/{name}"
    await migrate(dsn)
    try:
        yield dsn
    finally:
        admin = await asyncpg.connect(f"{PG_SERVER}/postgres")
        try:
            await admin.execute(f'drop database if exists "{name}" with (force)')
        finally:
            await admin.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_report(name: str, sections: list[tuple[str, str]]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%MZ")
    path = RESULTS / f"{stamp}-{name}.md"
    body = [f"# {name} — {stamp}", ""]
    for title, content in sections:
        body += [f"## {title}", "", content, ""]
    path.write_text("\n".join(body))
    return path
