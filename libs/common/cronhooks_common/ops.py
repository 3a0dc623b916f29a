"""Operational endpoints every service serves: /healthz, /readyz, /metrics (CONTRACT §1)."""

from __future__ import annotations

import asyncio

import asyncpg
from aio_pika.abc import AbstractRobustConnection
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from cronhooks_common.migrate import pending_migrations


async def readiness(pool: asyncpg.Pool, amqp: AbstractRobustConnection) -> str | None:
    """None when ready, else the reason."""
    if amqp.is_closed:
        return "rabbitmq: not connected"
    try:
        async with asyncio.timeout(3):
            async with pool.acquire() as conn:
                pending = await pending_migrations(conn)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"postgres: {type(exc).__name__}: {exc}".strip()
    if pending:
        first = pending[0]
        return (
            f"migrations: {len(pending)} pending, first {first.component} "
            f"{first.version:04d}_{first.name}"
        )
    return None


def add_ops_routes(
    app: web.Application, *, pool: asyncpg.Pool, amqp: AbstractRobustConnection
) -> None:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        reason = await readiness(pool, amqp)
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "unavailable", "reason": reason}, status=503)

    async def metrics(_: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
