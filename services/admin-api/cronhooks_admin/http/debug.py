"""The debug endpoints (CONTRACT §12, the seed's DEV_MODE, shaped after trip2g's), served
by admin-api only with CRONHOOKS_DEV_MODE=true and without authentication. Off, the routes
do not exist: 404 like any unknown path.

| request                                          | answer                                   |
|--------------------------------------------------|------------------------------------------|
| POST /debug/test_webhook?status=&delay=&body=    | recorded; `status` (200), after `delay`, |
|                                                  | with `body`, else the request's own body |
| GET  /debug/test_webhook_calls[?last=N]          | {"calls": [...]} oldest first            |
| DELETE /debug/test_webhook_calls                 | {"ok": true, "cleared": n}               |
| POST /debug/wait_all_jobs                        | 200 `ok: …` once nothing is pending;     |
|                                                  | 504 `timeout: …` after 30 s              |
| POST /debug/run_cron_job?id=N                    | {"delivery_id"} (= triggerCronWebhook)   |

trip2g's scripts call wait_all_jobs and run_cron_job with GET and grep the answer for
`^ok:`, so both methods are served and the answer is that line of text (JSON when the
client asks for it with `Accept: application/json`). Bad parameters are 400
{"error": "<param>: <reason>", "field": "<param>"}.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
import structlog
from aiohttp import web

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import Commands
from cronhooks_admin.errors import InputError, NotFound, Paused
from cronhooks_admin.http.pending import describe, pending_work
from cronhooks_admin.http.sink import (
    Call,
    CallLog,
    parse_delay,
    parse_id,
    parse_last,
    parse_status,
    text_map,
)
from cronhooks_common import jsonfast
from cronhooks_common.clock import Clock, iso
from cronhooks_common.http_limits import TEST_WEBHOOK_BODY_BYTES, BodyRefused, read_body

log = structlog.get_logger(__name__)

WAIT_SECONDS = 30.0  # wait_all_jobs answers within this, done or not
POLL_SECONDS = 0.05
DEBUG_ADMIN = Admin(id=0, name="debug")  # the actor of what the debug endpoints append

Sleep = Callable[[float], Awaitable[None]]


def _json(value: object, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, dumps=jsonfast.dumps)


def _bad(exc: InputError) -> web.Response:
    return _json({"error": str(exc), "field": exc.field}, status=400)


@dataclass
class DebugRoutes:
    pool: asyncpg.Pool
    commands: Commands
    clock: Clock
    calls: CallLog = field(default_factory=CallLog)
    wait_seconds: float = WAIT_SECONDS
    # The sink's `delay` stands for a slow agent: it is real time, the time the sender's
    # HTTP timeout counts, not the (injectable) clock of the platform's logic.
    sleep: Sleep = asyncio.sleep

    def add_to(self, app: web.Application) -> None:
        app.router.add_route("*", "/debug/test_webhook", self.test_webhook)
        app.router.add_get("/debug/test_webhook_calls", self.list_calls)
        app.router.add_delete("/debug/test_webhook_calls", self.clear_calls)
        for method in ("GET", "POST"):
            app.router.add_route(method, "/debug/wait_all_jobs", self.wait_all_jobs)
            app.router.add_route(method, "/debug/run_cron_job", self.run_cron_job)

    async def test_webhook(self, request: web.Request) -> web.Response:
        try:
            status = parse_status(request.query.get("status"))
            delay = parse_delay(request.query.get("delay"))
        except InputError as exc:
            return _bad(exc)
        try:
            raw = await read_body(request, TEST_WEBHOOK_BODY_BYTES)
        except BodyRefused as exc:
            raise exc.http_error({"error": str(exc)}) from None
        self.calls.record(
            Call(
                received_at=iso(self.clock.now()),
                method=request.method,
                path=request.path,
                query=text_map(request.query.items()),
                headers=text_map(request.headers.items()),
                raw=raw,
            )
        )
        if delay:
            await self.sleep(delay)
        told = request.query.get("body")
        if told is None:  # echo: the same bytes, the same type
            content_type = request.headers.get("Content-Type", "application/octet-stream")
            return web.Response(status=status, body=raw, headers={"Content-Type": content_type})
        try:
            jsonfast.loads(told)
            content_type = "application/json"
        except ValueError:
            content_type = "text/plain; charset=utf-8"
        return web.Response(
            status=status, body=told.encode(), headers={"Content-Type": content_type}
        )

    async def list_calls(self, request: web.Request) -> web.Response:
        try:
            last = parse_last(request.query.get("last"))
        except InputError as exc:
            return _bad(exc)
        return _json({"calls": [c.to_json() for c in self.calls.latest(last)]})

    async def clear_calls(self, _: web.Request) -> web.Response:
        return _json({"ok": True, "cleared": self.calls.clear()})

    async def wait_all_jobs(self, request: web.Request) -> web.Response:
        """Answer once nothing is pending (pending.py), or after `wait_seconds` with
        what still is: 504, as trip2g answers its own timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        while pending := await pending_work(self.pool, self.clock.now()):
            if loop.time() >= deadline:
                log.warning("debug_wait_timeout", pending=pending)
                text = f"timeout: still pending after {self.wait_seconds:g} s: {describe(pending)}"
                return _answer(request, text, pending, status=504)
            await asyncio.sleep(POLL_SECONDS)
        return _answer(request, "ok: no delivery pending", {}, status=200)

    async def run_cron_job(self, request: web.Request) -> web.Response:
        try:
            webhook_id = parse_id(request.query.get("id"))
        except InputError as exc:
            return _bad(exc)
        try:
            delivery_id = await self.commands.deliveries.trigger_webhook(webhook_id, DEBUG_ADMIN)
        except NotFound as exc:
            return _json({"error": str(exc)}, status=404)
        except Paused as exc:  # CONTRACT §16.4: as triggerCronWebhook
            return _json({"error": str(exc)}, status=409)
        return _json({"delivery_id": delivery_id, "webhook_id": webhook_id})


def _answer(request: web.Request, text: str, pending: dict[str, int], status: int) -> web.Response:
    if "application/json" in request.headers.get("Accept", ""):
        return _json({"ok": status == 200, "pending": pending, "message": text}, status=status)
    return web.Response(text=text + "\n", status=status)


def add_debug_routes(
    app: web.Application, *, pool: asyncpg.Pool, commands: Commands, clock: Clock
) -> DebugRoutes:
    routes = DebugRoutes(pool=pool, commands=commands, clock=clock)
    routes.add_to(app)
    return routes
