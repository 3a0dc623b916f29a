"""Boot services inside the test's event loop, on the real database and broker.

Same `bootstrap` functions as `cronhooks run`, but with a clock the test controls and
HTTP served on a free loopback port.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from aiohttp import web

from cronhooks_cli.cli import SERVICES
from cronhooks_common import broker, db
from cronhooks_common.clock import Clock
from cronhooks_common.http_limits import make_runner
from cronhooks_common.ops import add_ops_routes
from cronhooks_common.relay import OutboxRelay
from cronhooks_common.service import Runtime
from cronhooks_common.settings import Settings


@dataclass
class Running:
    services: dict[str, Any] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)

    async def graphql(
        self, token: str | None, query: str, variables: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{self.urls['admin-api']}/graphql",
                json={"query": query, "variables": variables or {}},
                headers=headers,
            ) as resp,
        ):
            return resp.status, await resp.json()


@asynccontextmanager
async def running(
    settings: Settings, clock: Clock, names: tuple[str, ...] = tuple(SERVICES)
) -> AsyncIterator[Running]:
    pool = await db.create_pool(settings.database_url, name="inproc", max_size=20)
    amqp = await broker.connect(settings.amqp_url, name="inproc")
    relay = asyncio.create_task(
        OutboxRelay(dsn=settings.database_url, amqp=amqp, name="inproc").run()
    )
    out = Running()
    runners: list[web.AppRunner] = []
    try:
        for name in names:
            runtime = Runtime(name=name, settings=settings, pool=pool, amqp=amqp, clock=clock)
            add_ops_routes(runtime.http, pool=pool, amqp=amqp)
            service = await importlib.import_module(SERVICES[name]).bootstrap(runtime)
            await service.start()
            runner = make_runner(runtime.http)  # the server of `cronhooks run`
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            out.services[name] = service
            out.urls[name] = f"http://127.0.0.1:{port}"
            runners.append(runner)
        if "admin-api" in out.services and "importer" in out.urls:
            # Admin note writes go to the importer, which served on a free port.
            out.services["admin-api"].note_writes.importer_url = out.urls["importer"]
        yield out
    finally:
        overran: list[str] = []
        for runner in runners:
            await _bounded(runner.cleanup(), "an HTTP server's cleanup", overran)
        for name, service in out.services.items():
            await _bounded(service.stop(), f"{name}.stop()", overran)
        relay.cancel()
        await _bounded(asyncio.gather(relay, return_exceptions=True), "the relay's end", overran)
        await _bounded(amqp.close(), "the broker connection's close", overran)
        await _bounded(pool.close(), "the pool's close", overran)
        if overran:
            raise AssertionError(
                f"in-process teardown: {', '.join(overran)} did not finish within"
                f" {STOP_WITHIN} s (a stop must end what it started: a loop that loses the"
                " cancel of its stop, as with asyncio.wait_for on 3.11, runs on for ever)"
            )


# CONTRACT §1: SIGTERM drains within 30 s. Generous for a loaded 2-core machine: a stop
# finishes in well under a second once its in-flight work is done.
STOP_WITHIN = 30.0
CANCEL_WITHIN = 5.0  # for a step past its bound to unwind once cancelled


async def _bounded(step: Awaitable[Any], what: str, overran: list[str]) -> None:
    """A teardown step, given at most STOP_WITHIN seconds; past the bound it is named in
    `overran` (the test then fails) and cancelled, and the teardown goes on: a stop that
    never returns fails its test instead of stalling the suite (a full `make test` once
    stalled for minutes here: a loop's wait lost its stop's cancel, clock.wait_set)."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=STOP_WITHIN)
    if done:
        task.result()  # what it raised, the teardown raises
        return
    overran.append(what)
    task.cancel()
    # Not awaited without a bound: a step that swallowed one cancel may swallow this one.
    await asyncio.wait({task}, timeout=CANCEL_WITHIN)


def window_start() -> datetime:
    """2.5 minutes into the current 5-minute window of the real clock: a ManualClock start
    whose signatures stay verifiable (the Standard Webhooks verifier refuses timestamps
    far from the real clock) and whose next */5 slot is 2.5 minutes away."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(minutes=now.minute % 5) + timedelta(minutes=2, seconds=30)


async def admin_token(database_url: str, name: str = "test") -> str:
    from cronhooks_admin.auth import create_token

    conn = await db.connect(database_url, name="token")
    try:
        return await create_token(conn, name)
    finally:
        await conn.close()


async def eventually(check: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll an async `check` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")
        await asyncio.sleep(interval)
