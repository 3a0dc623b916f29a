"""HTTP routes of admin-api: POST /graphql (Bearer admin token), GET /graphql (explorer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import structlog
from aiohttp import web
from ariadne import graphql
from ariadne.explorer import ExplorerGraphiQL
from graphql import GraphQLSchema

from cronhooks_admin.agents import Agents
from cronhooks_admin.auth import Authenticator
from cronhooks_admin.commands import Commands
from cronhooks_admin.context import NEXT_RUNS, Context
from cronhooks_common.clock import Clock
from cronhooks_common.graphql_limits import Documents, LimitedRequest
from cronhooks_common.graphql_support import silence_ariadne_logger
from cronhooks_common.http_limits import GRAPHQL_BODY_BYTES, BodyRefused, read_body

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
    agents: Agents,
    clock: Clock,
) -> None:
    explorer = ExplorerGraphiQL(title="cronhooks admin GraphQL").html(None)
    ariadne_logger = silence_ariadne_logger()
    authenticate = Authenticator(pool, clock=clock)
    documents = Documents(costs=[NEXT_RUNS])

    async def explorer_page(_: web.Request) -> web.Response:
        return web.Response(text=explorer, content_type="text/html")

    async def execute(request: web.Request) -> web.Response:
        admin = await authenticate(request.headers.get("Authorization"))
        if admin is None:
            return _error(401, "UNAUTHENTICATED", "a valid admin token is required (Bearer)")
        try:
            data: Any = json.loads(await read_body(request, GRAPHQL_BODY_BYTES))
        except BodyRefused as exc:
            body = {"errors": [{"message": str(exc), "extensions": {"code": exc.code}}]}
            raise exc.http_error(body) from None
        except (ValueError, UnicodeDecodeError):
            return _error(400, "BAD_REQUEST", "request body must be JSON")
        if not isinstance(data, dict):
            return _error(400, "BAD_REQUEST", "request body must be a JSON object")
        context = Context(admin=admin, pool=pool, commands=commands, clock=clock, agents=agents)
        limited = LimitedRequest(documents)
        with structlog.contextvars.bound_contextvars(actor=admin.actor):
            success, result = await graphql(
                schema,
                data,
                context_value=context,
                debug=False,
                query_parser=limited.query_parser,
                query_validator=documents.validate,
                error_formatter=limited.format_error,
                logger=ariadne_logger,
            )
        if context.next_runs.refused:
            # Lists multiplied nextRuns past the budget: the answer is that one refusal,
            # not a copy of it for every webhook after the budget ran out.
            result = {"errors": [limited.format_error(NEXT_RUNS.refusal())]}
        return web.json_response(result, status=200 if success or "data" in result else 400)

    page = (Path(__file__).parent / "static" / "index.html").read_text()

    async def web_page(_: web.Request) -> web.Response:
        # The page itself is public; everything it shows comes from /graphql with the token.
        return web.Response(text=page, content_type="text/html")

    app.router.add_get("/", web_page)
    app.router.add_get("/graphql", explorer_page)
    app.router.add_post("/graphql", execute)
