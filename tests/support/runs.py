"""Runs of asynchronous agents (CONTRACT §16.2) in tests: an agent that answers 202 and
keeps the token, the run's row, and the agent's calls to the run endpoints."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
from aiohttp import web

from tests.support import token_api
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, trigger
from tests.support.inprocess import eventually

if TYPE_CHECKING:
    from tests.support.system import System

REPORT = "/api/runs/current"
HEARTBEAT = "/api/runs/current/heartbeat"


@dataclass
class AsyncAgent:
    """Answers every delivery 202 (with `body`) and keeps what each request carried."""

    agent: Agent
    name: str = "async"
    body: Any = field(default_factory=lambda: {"status": "accepted"})

    @property
    def url(self) -> str:
        return self.agent.url_for(self.name, self._accept)

    async def _accept(self, _: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response(self.body, status=202)

    def token_of(self, delivery_id: int) -> str:
        [got] = [r for r in self.agent.at(self.name) if r.body["id"] == delivery_id]
        return str(got.body["api_token"])


async def run_row(dsn: str, delivery_id: int) -> dict[str, Any] | None:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("select * from shared.runs where delivery_id = $1", delivery_id)
        if row is None:
            return None
        return {**dict(row), "logs": json.loads(row["logs"]), "costs": json.loads(row["costs"])}
    finally:
        await conn.close()


async def run_state(dsn: str, delivery_id: int, state: str, timeout: float = 10) -> dict[str, Any]:
    """The run's row once it is in `state`."""

    async def check() -> dict[str, Any] | None:
        row = await run_row(dsn, delivery_id)
        return row if row is not None and row["state"] == state else None

    return await eventually(check, timeout=timeout)  # type: ignore[no-any-return]


async def start_run(system: System, runner: AsyncAgent, **fields: Any) -> tuple[int, int, str]:
    """A webhook with passApiKey whose agent answers 202, triggered: (its id, the delivery's,
    the delivery's api_token) once the run is RUNNING."""
    hook_id, _ = await create_webhook(
        system, system.admin, runner.url, passApiKey=True, writePatterns=["*"], **fields
    )
    return (hook_id, *await run_of(system, runner, hook_id))


async def run_of(system: System, runner: AsyncAgent, hook_id: int) -> tuple[int, str]:
    delivery_id = await trigger(system, system.admin, hook_id)
    await run_state(system.dsn, delivery_id, "RUNNING")
    return delivery_id, runner.token_of(delivery_id)


async def report(system: System, token: str | None, body: Any = None, **kw: Any) -> tuple[int, Any]:
    return await token_api.call(system, "POST", REPORT, token, body, **kw)


async def heartbeat(
    system: System, token: str | None, body: Any = None, **kw: Any
) -> tuple[int, Any]:
    return await token_api.call(system, "POST", HEARTBEAT, token, body, **kw)


async def run_events(dsn: str, delivery_id: int) -> list[asyncpg.Record]:
    return [
        e for e in await events_of(dsn, f"delivery-{delivery_id}") if e["type"].startswith("run.")
    ]
