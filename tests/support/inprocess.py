"""Boot services inside the test's event loop, on the real database and broker.

Same `bootstrap` functions as `cronhooks run`, but with a clock the test controls and
HTTP served on a free loopback port.
"""

from __future__ import annotations

import asyncio
import importlib
import warnings
from collections.abc import AsyncIterator
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
        for runner in runners:
            await _bounded(runner.cleanup(), "an HTTP server's cleanup")
        for name, service in out.services.items():
            await _bounded(service.stop(), f"{name}.stop()")
        relay.cancel()
        await asyncio.gather(relay, return_exceptions=True)
        await amqp.close()
        await pool.close()


STOP_WITHIN = 30.0  # CONTRACT §1: SIGTERM drains within 30 s


async def _bounded(step: Any, what: str) -> None:
    """A teardown step, given at most STOP_WITHIN seconds. A full `make test` once stalled
    for minutes in the teardown of an in-process service (cause not found yet; see the
    stop notes): past the bound the step is cancelled and a warning names it, in the
    run's warnings summary, instead of the suite hanging until CI gives up."""
    try:
        await asyncio.wait_for(step, STOP_WITHIN)
    except TimeoutError:
        warnings.warn(
            f"in-process teardown: {what} did not finish within {STOP_WITHIN} s", stacklevel=1
        )


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
