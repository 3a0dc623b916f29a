"""HTTP routes of admin-api: POST /graphql (Bearer admin token), GET /graphql (explorer)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import structlog
from aiohttp import web
from ariadne import graphql
from ariadne.explorer import ExplorerGraphiQL
from graphql import GraphQLSchema

from cronhooks_admin.auth import authenticate
from cronhooks_admin.commands import Commands
from cronhooks_admin.context import Context
from cronhooks_common.clock import Clock

log = structlog.get_logger(__name__)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(
        {"errors": [{"message": message, "extensions": {"code": code}}]}, status=status
    )


def add_graphql_routes(
    app: web.Application,
    *,
    schema: GraphQLSchema,
    pool: asyncpg.Pool,
    commands: Commands,
    clock: Clock,
) -> None:
    explorer = ExplorerGraphiQL(title="cronhooks admin GraphQL").html(None)

    async def explorer_page(_: web.Request) -> web.Response:
        return web.Response(text=explorer, content_type="text/html")

    async def execute(request: web.Request) -> web.Response:
        async with pool.acquire() as conn:
            admin = await authenticate(conn, request.headers.get("Authorization"))
        if admin is None:
            return _error(401, "UNAUTHENTICATED", "a valid admin token is required (Bearer)")
        try:
            data: Any = await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "BAD_REQUEST", "request body must be JSON")
        if not isinstance(data, dict):
            return _error(400, "BAD_REQUEST", "request body must be a JSON object")
        context = Context(admin=admin, pool=pool, commands=commands, clock=clock)
        with structlog.contextvars.bound_contextvars(actor=admin.actor):
            success, result = await graphql(schema, data, context_value=context, debug=False)
        return web.json_response(result, status=200 if success or "data" in result else 400)

    app.router.add_get("/graphql", explorer_page)
    app.router.add_post("/graphql", execute)
