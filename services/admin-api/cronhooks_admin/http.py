"""HTTP routes of admin-api: POST /graphql (Bearer admin token), GET /graphql (explorer)."""

from __future__ import annotations

import json
from collections.abc import Collection
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import asyncpg
import structlog
from aiohttp import web
from ariadne import graphql
from ariadne.explorer import ExplorerGraphiQL
from graphql import DocumentNode, GraphQLError, GraphQLSchema, parse, validate
from graphql.validation import ASTValidationRule

from cronhooks_admin.agents import Agents
from cronhooks_admin.auth import Authenticator
from cronhooks_admin.commands import Commands
from cronhooks_admin.context import Context
from cronhooks_common.clock import Clock
from cronhooks_common.graphql_support import format_error, silence_ariadne_logger
from cronhooks_common.http_limits import GRAPHQL_BODY_BYTES, BodyRefused, read_body

log = structlog.get_logger(__name__)


@lru_cache(maxsize=512)
def _parse(query: str) -> DocumentNode:
    return parse(query)


def parse_cached(_: Any, data: dict[str, Any]) -> DocumentNode:
    """Parse each distinct query text once (clients send the same few operations)."""
    query = data.get("query")
    if not isinstance(query, str):
        raise GraphQLError("the request needs a 'query' string")
    return _parse(query)


def parsed_or_none(data: dict[str, Any]) -> DocumentNode | None:
    """The request's document if it parses (graphql() reports why when it does not)."""
    try:
        return parse_cached(None, data)
    except GraphQLError:
        return None


def validate_cached(
    schema: GraphQLSchema,
    document_ast: DocumentNode,
    rules: Collection[type[ASTValidationRule]] | None = None,
    max_errors: int | None = None,
    type_info: Any = None,
) -> list[GraphQLError]:
    """Validate each parsed (cached, so identical) document once."""
    entry = _VALIDATED.get(id(document_ast))
    if entry is not None and entry[0] is document_ast:
        return entry[1]
    errors = validate(schema, document_ast, rules, max_errors)
    if len(_VALIDATED) > 1024:
        _VALIDATED.clear()
    _VALIDATED[id(document_ast)] = (document_ast, errors)
    return errors


# id(document) → (the document, its validation errors); the document is kept so that a
# reused id can never match a different document.
_VALIDATED: dict[int, tuple[DocumentNode, list[GraphQLError]]] = {}


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
        with structlog.contextvars.bound_contextvars(actor=admin.actor):
            success, result = await graphql(
                schema,
                data,
                context_value=context,
                debug=False,
                query_parser=parse_cached,
                query_validator=validate_cached,
                error_formatter=partial(format_error, document=parsed_or_none(data)),
                logger=ariadne_logger,
            )
        return web.json_response(result, status=200 if success or "data" in result else 400)

    page = (Path(__file__).parent / "static" / "index.html").read_text()

    async def web_page(_: web.Request) -> web.Response:
        # The page itself is public; everything it shows comes from /graphql with the token.
        return web.Response(text=page, content_type="text/html")

    app.router.add_get("/", web_page)
    app.router.add_get("/graphql", explorer_page)
    app.router.add_post("/graphql", execute)
