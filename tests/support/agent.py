"""A real HTTP agent on loopback that records every request it receives."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes
    at: float  # time.time() when received

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


Responder = Callable[[web.Request, Received], Awaitable[web.StreamResponse]]


async def ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


@dataclass
class Agent:
    responder: Responder = ok
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    routes: dict[str, Responder] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def url_for(self, name: str, responder: Responder) -> str:
        """A URL of this agent answered by `responder` (requests are recorded alike)."""
        self.routes[f"/{name}"] = responder
        return f"http://127.0.0.1:{self.port}/{name}"

    def at(self, name: str) -> list[Received]:
        return [r for r in self.received if r.path == f"/{name}"]

    async def start(self) -> Agent:
        app = web.Application(client_max_size=16 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        entry = Received(request.path, dict(request.headers), await request.read(), time.time())
        self.received.append(entry)
        async with self._arrived:
            self._arrived.notify_all()
        return await self.routes.get(request.path, self.responder)(request, entry)

    async def wait_for(
        self, count: int, timeout: float = 10.0, name: str | None = None
    ) -> list[Received]:
        def seen() -> list[Received]:
            return self.received if name is None else self.at(name)

        async def enough() -> None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: len(seen()) >= count)

        await asyncio.wait_for(enough(), timeout)
        return seen()
