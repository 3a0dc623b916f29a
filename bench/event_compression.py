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
import msgspec

from bench import events_codec
from bench.agent import REPORT
from bench.common import median, scratch_database, table
from cronhooks_common import agent_report
from cronhooks_common.events import DeliveryRequested, DeliverySucceeded
from cronhooks_dispatcher import payload

EVENTS = 5_000
ROUNDS = 7
METHODS = ("pglz", "lz4")


def outcome(delivery_id: int) -> str:
    """A `delivery.succeeded` as the herd stores it: the request body the dispatcher builds
    for a herd slot, the bench agent's answer and the report it parses to."""
    request = msgspec.convert(
        {
            **events_codec.DATA,
            "delivery_id": delivery_id,
            "webhook_id": delivery_id + 1,
            "target": {**events_codec.TARGET, "pass_api_key": False},  # as the herd's
        },
        DeliveryRequested,
    )
    body = payload.build_body(request, timestamp=1796691120, api_token=None, api_url=None)
    event = DeliverySucceeded(
        **request.fields(),
        status="success",
        started_at="2026-12-08T00:52:00.085Z",
        duration_ms=51,
        response_status=200,
        error=None,
        request_body=payload.encode(body).decode(),
        response_body=REPORT.decode(),
        **agent_report.event_fields(agent_report.of_answer(json.loads(REPORT))),
    )
    return msgspec.json.encode(event).decode()


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
