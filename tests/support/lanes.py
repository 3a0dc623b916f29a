"""Helpers for DELAY and execution-group tests against real processes: a slow agent that
records when each request started and ended, and a burst of due slots made by moving the
scheduler's timers into the past (as the fault suite does), so no test waits for a minute."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from aiohttp import web

from tests.support.agent import Agent, Received
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.processes import Cluster


@dataclass
class Call:
    delivery_id: int
    scheduled_for: str | None
    started: float
    ended: float | None = None


@dataclass
class SlowAgent:
    """Answers 200 after `seconds`; `calls` in the order they arrived."""

    seconds: float = 1.0
    agent: Agent = field(default_factory=Agent)
    calls: list[Call] = field(default_factory=list)

    async def start(self) -> SlowAgent:
        self.agent.responder = self._answer
        await self.agent.start()
        return self

    async def stop(self) -> None:
        await self.agent.stop()

    @property
    def url(self) -> str:
        return self.agent.url

    async def _answer(self, _: web.Request, got: Received) -> web.StreamResponse:
        call = Call(got.body["id"], got.body.get("scheduled_for"), time.monotonic())
        self.calls.append(call)
        await asyncio.sleep(self.seconds)
        call.ended = time.monotonic()
        return web.Response(status=200)

    def overlaps(self) -> list[tuple[int, int]]:
        """Pairs of *different* deliveries that were at the agent at the same time (a
        repeat of one delivery after a kill -9 may overlap its own first try)."""
        out = []
        for i, a in enumerate(self.calls):
            for b in self.calls[i + 1 :]:
                if a.delivery_id == b.delivery_id:
                    continue
                if b.started < (a.ended or float("inf")) and a.started < (b.ended or float("inf")):
                    out.append((a.delivery_id, b.delivery_id))
        return out

    def first_calls(self) -> list[Call]:
        seen: set[int] = set()
        out = []
        for call in self.calls:
            if call.delivery_id not in seen:
                seen.add(call.delivery_id)
                out.append(call)
        return out


async def admin(c: Cluster) -> str:
    return await c.admin_token("lanes")


async def create(c: Cluster, token: str, url: str, **fields: Any) -> int:
    body = await c.graphql(
        token,
        CREATE_WEBHOOK,
        {
            "input": {
                "url": url,
                "cronSchedule": "* * * * *",
                "catchUpPolicy": "ALL",
                "misfireGraceSeconds": 7 * 86400,
                "timeoutSeconds": 60,
                **fields,
            }
        },
    )
    assert "errors" not in body, body
    return int(body["data"]["createCronWebhook"]["cronWebhook"]["id"])


async def burst(dsn: str, webhook_ids: list[int], minutes: int) -> datetime:
    """Make each webhook's last `minutes` + 1 slots due at once; return the last slot."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    conn = await asyncpg.connect(dsn)
    try:
        for _ in range(300):
            count = await conn.fetchval(
                "select count(*) from scheduler.timers where subject = any($1::bigint[])",
                webhook_ids,
            )
            if count == len(webhook_ids):
                break
            await asyncio.sleep(0.1)
        await conn.execute(
            "update scheduler.timers set due_at = $2 where subject = any($1::bigint[])",
            webhook_ids,
            now - timedelta(minutes=minutes),
        )
        await conn.execute("select pg_notify('cronhooks_timers', '')")
    finally:
        await conn.close()
    return now


async def burst_deliveries(dsn: str, webhook_ids: list[int], last_slot: datetime) -> list[Any]:
    """The burst's slots (webhook_id, slot, delivery_id), once all are requested."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(
            "select webhook_id, slot, delivery_id from scheduler.slot_requests"
            " where webhook_id = any($1::bigint[]) and slot <= $2 order by slot, delivery_id",
            webhook_ids,
            last_slot,
        )
    finally:
        await conn.close()


async def outcomes(dsn: str, delivery_ids: list[int]) -> dict[int, list[str]]:
    """Every delivery's event types, in stream order."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "select (data->>'delivery_id')::bigint as id, type from eventstore.events"
            " where stream = any($1::text[]) order by stream, version",
            [f"delivery-{d}" for d in delivery_ids],
        )
    finally:
        await conn.close()
    out: dict[int, list[str]] = {d: [] for d in delivery_ids}
    for r in rows:
        out[r["id"]].append(r["type"])
    return out


def ended(types: list[str]) -> bool:
    return bool(types) and types[-1] in (
        "delivery.succeeded",
        "delivery.failed",
        "delivery.skipped",
    )


async def settle(dsn: str, delivery_ids: list[int], timeout: float = 120) -> dict[int, list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        got = await outcomes(dsn, delivery_ids)
        if all(ended(t) for t in got.values()):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled: {got}")
        await asyncio.sleep(0.2)


async def wait_requested(
    dsn: str, webhook_ids: list[int], last_slot: datetime, count: int
) -> list[Any]:
    for _ in range(600):
        rows = await burst_deliveries(dsn, webhook_ids, last_slot)
        if len(rows) >= count:
            return rows
        await asyncio.sleep(0.1)
    raise AssertionError("the burst was not requested")
