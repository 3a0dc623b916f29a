"""`python -m bench compression`: what Postgres spends on a herd delivery's outcome event,
compressed by pglz (the default) or lz4 (migration 0032).

Since revision 3 the outcome event of the herd's agent (two costs, three log entries, its
request body carrying §3's longer response_schema) is about 2.4 KB of JSON: past the toast
threshold, so Postgres compresses it on insert and decompresses it for every reader. Two
tables in a scratch database differ only in their `data` column's compression; the same
EVENTS events go into each as the event store appends them (JSON text cast to jsonb, one
statement), and are read back as its readers read them (jsonb to text). Rounds alternate
the two tables; the figure is the median, in microseconds of the server's time per event.
"""

from __future__ import annotations

import json
import time

import asyncpg

from bench.agent import REPORT
from bench.common import median, scratch_database, table
from cronhooks_dispatcher.payload import RESPONSE_SCHEMA

EVENTS = 5_000
ROUNDS = 7
METHODS = ("pglz", "lz4")


def outcome(delivery_id: int) -> str:
    """A `delivery.succeeded` as the herd bench stores it (its shape, its sizes)."""
    report = json.loads(REPORT)
    request = {
        "version": 1,
        "id": delivery_id,
        "webhook_id": delivery_id + 1,
        "kind": "cron",
        "timestamp": 1796691120,
        "scheduled_for": "2026-12-08T00:52:00.000Z",
        "trigger": "schedule",
        "attempt": 1,
        "missed_count": 0,
        "instruction": f"bench {delivery_id}",
        "response_schema": RESPONSE_SCHEMA,
        "trace": f"cron:{delivery_id}",
    }
    return json.dumps(
        {
            "kind": "cron",
            "costs": [{"unit": u, "amount": float(a)} for u, a in report["costs"].items()],
            "error": None,
            "status": "success",
            "attempt": 1,
            "trigger": "schedule",
            "agent_logs": [{"ts": None, "data": None, **entry} for entry in report["logs"]],
            "started_at": "2026-12-08T00:52:00.085Z",
            "webhook_id": delivery_id + 1,
            "delivery_id": delivery_id,
            "duration_ms": 51,
            "missed_count": 0,
            "request_body": json.dumps(request, separators=(",", ":")),
            "response_body": REPORT.decode(),
            "scheduled_for": "2026-12-08T00:52:00.000Z",
            "response_status": 200,
        }
    )


async def _timed(conn: asyncpg.Connection, statement: str, *args: object) -> float:
    started = time.perf_counter()
    await conn.execute(statement, *args)
    return (time.perf_counter() - started) / EVENTS * 1e6


async def compression() -> list[tuple[str, str]]:
    data = [outcome(i) for i in range(1, EVENTS + 1)]
    size = sum(len(d) for d in data) / EVENTS
    inserts: dict[str, list[float]] = {m: [] for m in METHODS}
    reads: dict[str, list[float]] = {m: [] for m in METHODS}
    stored: dict[str, float] = {}
    async with scratch_database() as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            for method in METHODS:
                await conn.execute(f"create table bench_{method} (data jsonb compression {method})")
            for _ in range(ROUNDS):
                for method in METHODS:
                    await conn.execute(f"truncate bench_{method}")
                    inserts[method].append(
                        await _timed(
                            conn,
                            f"insert into bench_{method} select unnest($1::text[])::jsonb",
                            data,
                        )
                    )
                    reads[method].append(
                        await _timed(conn, f"select sum(length(data::text)) from bench_{method}")
                    )
            for method in METHODS:
                stored[method] = await conn.fetchval(
                    f"select avg(pg_column_size(data)) from bench_{method}"
                    f" where pg_column_compression(data) = '{method}'"
                )
        finally:
            await conn.close()
    rows = [
        [
            method,
            f"{size:.0f}",
            f"{stored[method]:.0f}" if stored[method] else "not compressed",
            f"{median(inserts[method]):.1f}",
            f"{median(reads[method]):.1f}",
        ]
        for method in METHODS
    ]
    headers = ["compression", "JSON bytes", "stored bytes", "insert µs/event", "read µs/event"]
    return [
        (
            f"Outcome events: pglz against lz4 ({EVENTS} events, median of {ROUNDS})",
            table(headers, rows),
        )
    ]
