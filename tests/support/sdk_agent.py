"""A real agent built on the SDK (cronhooks_agent), serving POST /api/cron/fire on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from cronhooks_agent import FireVerifier, SqliteClaimStore, fire_handler


@dataclass
class SdkAgent:
    verifier: FireVerifier
    store: SqliteClaimStore
    ready: asyncio.Event | None = None
    ready_timeout: float = 7.0
    runs: list[tuple[str, str]] = field(default_factory=list)
    requests: list[dict[str, object]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None
    _ran: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # What a claimed fire runs (besides being recorded); settable after start().
    on_fire: Callable[[str, str], Awaitable[None]] | None = None

    async def _run(self, job_id: str, fire_at: str) -> None:
        self.runs.append((job_id, fire_at))
        self._ran.set()
        if self.on_fire is not None:
            await self.on_fire(job_id, fire_at)

    async def start(self) -> SdkAgent:
        fire = fire_handler(
            verifier=self.verifier,
            store=self.store,
            run=self._run,
            ready=self.ready,
            ready_timeout=self.ready_timeout,
        )

        @web.middleware
        async def record(request: web.Request, handler):  # type: ignore[no-untyped-def]
            self.requests.append({"headers": dict(request.headers), "body": await request.read()})
            response = await handler(request)
            self.statuses.append(response.status)
            return response

        app = web.Application(middlewares=[record])
        app.router.add_post("/api/cron/fire", fire)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def wait_runs(self, count: int, timeout: float = 10.0) -> list[tuple[str, str]]:
        async def enough() -> None:
            while len(self.runs) < count:
                self._ran.clear()
                await self._ran.wait()

        await asyncio.wait_for(enough(), timeout)
        return self.runs

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
