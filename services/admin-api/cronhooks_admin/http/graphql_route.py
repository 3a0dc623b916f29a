"""POST /graphql: the admin GraphQL API (Bearer admin token), its request limits
(cronhooks_common.graphql_limits) and the request's context (graphql/context.py)."""

from __future__ import annotations

from typing import Any

import asyncpg
import structlog
from aiohttp import web
from ariadne import graphql
from graphql import GraphQLError, GraphQLSchema

from cronhooks_admin.auth import Authenticator
from cronhooks_admin.commands import Commands
from cronhooks_admin.commands.note_writes import NoteWrites
from cronhooks_admin.graphql import note_reads
from cronhooks_admin.graphql.context import NEXT_RUNS, Context
from cronhooks_common import logs
from cronhooks_common.clock import Clock
from cronhooks_common.graphql_limits import Documents, LimitedRequest
from cronhooks_common.graphql_support import silence_ariadne_logger
from cronhooks_common.http_limits import GRAPHQL_BODY_BYTES, BodyRefused, read_body
from cronhooks_common.json_input import TooDeep, loads
from cronhooks_common.refusals import log_refused

log = structlog.get_logger(__name__)


def _error(status: int, code: str, message: str, **extensions: str) -> web.Response:
    return web.json_response(
        {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]},
        status=status,
    )


def add_graphql_routes(
    app: web.Application,
    *,
    schema: GraphQLSchema,
    pool: asyncpg.Pool,
    commands: Commands,
    note_writes: NoteWrites,
    clock: Clock,
) -> None:
    ariadne_logger = silence_ariadne_logger()
    authenticate = Authenticator(pool, clock=clock)
    documents = Documents(costs=[NEXT_RUNS])

    async def execute(request: web.Request) -> web.Response:
        admin = await authenticate(request.headers.get("Authorization"))
        if admin is None:
            return _error(401, "UNAUTHENTICATED", "a valid admin token is required (Bearer)")
        try:
            data: Any = loads(await read_body(request, GRAPHQL_BODY_BYTES), what="request body")
        except BodyRefused as exc:
            body = {"errors": [{"message": str(exc), "extensions": {"code": exc.code}}]}
            raise exc.http_error(body) from None
        except TooDeep as exc:
            log_refused("graphql_error", field="body", reason=str(exc), code="BAD_REQUEST")
            return _error(400, "BAD_REQUEST", str(exc), field="body")
        except (ValueError, UnicodeDecodeError):
            log_refused("graphql_error", field="body", reason="not JSON", code="BAD_REQUEST")
            return _error(400, "BAD_REQUEST", "request body must be JSON")
        if not isinstance(data, dict):
            log_refused("graphql_error", field="body", reason="not an object", code="BAD_REQUEST")
            return _error(400, "BAD_REQUEST", "request body must be a JSON object")
        context = Context(
            admin=admin, pool=pool, commands=commands, note_writes=note_writes, clock=clock
        )
        limited = LimitedRequest(documents)
        with logs.bound(actor=admin.actor):
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
        refused = _refused_whole(context)
        if refused is not None:
            # A budget ran out (lists multiplied nextRuns past it, or the notes' content
            # would pass 16 MiB): the answer is that one refusal, not a copy of it for every
            # field after the budget ran out, nor the part answered before.
            result = {"data": None, "errors": [limited.format_error(refused)]}
            return web.json_response(result, status=400)
        return web.json_response(result, status=200 if success or "data" in result else 400)

    app.router.add_post("/graphql", execute)


def _refused_whole(context: Context) -> GraphQLError | None:
    if context.next_runs.refused:
        return NEXT_RUNS.refusal()
    if context.note_reads.refused:
        return note_reads.refusal()
    return None
