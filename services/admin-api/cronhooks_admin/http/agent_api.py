"""HTTP routes for agents (CONTRACT §9) and the JWKS that verifies fire JWTs.

| request                              | answer                                              |
|--------------------------------------|-----------------------------------------------------|
| POST /api/agent-cron/provision       | 200 {"schedule_id"}; 400 {"error", "field"}         |
| POST /api/agent-cron/cancel          | 200 {"ok": true}, also for an unknown job           |
| GET  /api/agent-cron/list            | 200 {"jobs": [J...], "armed": [J...]}, the caller's |
| GET  /.well-known/jwks.json          | 200 the public signing keys (no token needed)       |

`jobs` and `armed` hold the same items (`armed` is the key the hermes Chronos client reads);
each `fire_at` is the string exactly as provisioned. No token, or one never issued → 401;
the token of a deleted agent or one replaced by rotateAgentToken → 403
{"error": "invalid_client"}: that identity is gone for good.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from aiohttp import web

from cronhooks_admin.auth import AgentIdentity, InvalidClient, agent_for_token
from cronhooks_admin.commands.triggers import Triggers
from cronhooks_admin.errors import InputError
from cronhooks_common.clock import Clock
from cronhooks_common.http_limits import AGENT_CRON_BODY_BYTES, BodyRefused, read_body
from cronhooks_common.json_input import TooDeep, loads
from cronhooks_common.keys import published_jwks
from cronhooks_common.refusals import log_refused

Handler = Callable[[web.Request, AgentIdentity], Awaitable[web.Response]]


def _error(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


def add_agent_routes(
    app: web.Application, *, pool: asyncpg.Pool, triggers: Triggers, clock: Clock
) -> None:
    def authenticated(handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def wrapper(request: web.Request) -> web.Response:
            try:
                agent = await agent_for_token(pool, request.headers.get("Authorization"))
            except InvalidClient:
                return _error(403, "invalid_client")
            if agent is None:
                return _error(401, "a valid agent token is required (Bearer)")
            try:
                return await handler(request, agent)
            except InputError as exc:
                log_refused("agent_api_refused", field=exc.field, reason=exc.reason)
                return _error(400, f"{exc.field}: {exc.reason}", field=exc.field)

        return wrapper

    async def body_of(request: web.Request) -> dict[str, object]:
        """The request's JSON object, any fields: the command checks each it reads."""
        try:
            body = loads(await read_body(request, AGENT_CRON_BODY_BYTES), what="request body")
        except BodyRefused as exc:
            raise exc.http_error({"error": str(exc)}) from None
        except TooDeep as exc:
            log_refused("agent_api_refused", field="body", reason=str(exc))
            raise web.HTTPBadRequest(
                text=json.dumps({"error": str(exc), "field": "body"}),
                content_type="application/json",
            ) from None
        except (ValueError, UnicodeDecodeError):
            raise InputError("body", "must be a JSON object") from None
        if not isinstance(body, dict):
            raise InputError("body", "must be a JSON object")
        return body

    async def provision(request: web.Request, agent: AgentIdentity) -> web.Response:
        schedule_id = await triggers.provision(agent, await body_of(request))
        return web.json_response({"schedule_id": schedule_id})

    async def cancel(request: web.Request, agent: AgentIdentity) -> web.Response:
        await triggers.cancel(agent, await body_of(request))
        return web.json_response({"ok": True})

    async def list_jobs(_: web.Request, agent: AgentIdentity) -> web.Response:
        jobs = await triggers.jobs(agent)
        return web.json_response({"jobs": jobs, "armed": jobs})

    async def jwks(_: web.Request) -> web.Response:
        async with pool.acquire() as conn:
            keys = await published_jwks(conn, now=clock.now())
        return web.json_response(keys, headers={"Cache-Control": "public, max-age=60"})

    app.router.add_post("/api/agent-cron/provision", authenticated(provision))
    app.router.add_post("/api/agent-cron/cancel", authenticated(cancel))
    app.router.add_get("/api/agent-cron/list", authenticated(list_jobs))
    app.router.add_get("/.well-known/jwks.json", jwks)
