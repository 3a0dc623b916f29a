"""HTTP routes of admin-api: POST /graphql (Bearer admin token), GET /graphql (GraphiQL),
GET / (the admin web page), GET /static/… (their scripts, styles, GraphiQL and uPlot
themselves) and GET /favicon.ico."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import structlog
from aiohttp import web
from ariadne import graphql
from graphql import GraphQLError, GraphQLSchema

from cronhooks_admin import note_reads
from cronhooks_admin.agents import Agents
from cronhooks_admin.api_keys import ApiKeys
from cronhooks_admin.auth import Authenticator
from cronhooks_admin.commands import Commands
from cronhooks_admin.context import NEXT_RUNS, Context
from cronhooks_admin.note_writes import NoteWrites
from cronhooks_common import logs
from cronhooks_common.clock import Clock
from cronhooks_common.graphql_limits import Documents, LimitedRequest
from cronhooks_common.graphql_support import silence_ariadne_logger
from cronhooks_common.http_limits import GRAPHQL_BODY_BYTES, BodyRefused, read_body
from cronhooks_common.json_input import TooDeep, loads
from cronhooks_common.refusals import log_refused

log = structlog.get_logger(__name__)

STATIC = Path(__file__).parent / "static"

# CONTRACT §15 "Headers": the admin page and GraphiQL run scripts from this origin only
# (no inline script, no CDN: GraphiQL is vendored), talk to this origin only, and may not
# be framed. GraphiQL's CSS carries its fonts as data: URLs.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "font-src 'self' data:",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


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
    agents: Agents,
    api_keys: ApiKeys,
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
            admin=admin,
            pool=pool,
            commands=commands,
            clock=clock,
            agents=agents,
            api_keys=api_keys,
            note_writes=note_writes,
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

    # The pages are public; everything they show comes from POST /graphql with the token.
    app.router.add_get("/", _page("index.html"))
    app.router.add_get("/graphql", _page("graphiql.html"))
    app.router.add_get("/favicon.ico", _favicon)  # asked for by browsers whatever a page says
    app.router.add_get("/static/{name:.+}", _static_files())
    app.router.add_post("/graphql", execute)


def _refused_whole(context: Context) -> GraphQLError | None:
    if context.next_runs.refused:
        return NEXT_RUNS.refusal()
    if context.note_reads.refused:
        return note_reads.refusal()
    return None


def _page(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    html = (STATIC / name).read_text()

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html", headers=SECURITY_HEADERS)

    return page


async def _favicon(_: web.Request) -> web.FileResponse:
    headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=86400", "Content-Type": "image/x-icon"}
    return web.FileResponse(STATIC / "favicon.ico", headers=headers)


def _static_files() -> Callable[[web.Request], Awaitable[web.FileResponse]]:
    """The files under static/, looked up by name among those there at start (so no path
    can lead outside it); revalidated on each use (Last-Modified), as they change with
    releases."""
    files = {p.relative_to(STATIC).as_posix(): p for p in STATIC.rglob("*") if p.is_file()}
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}

    async def static_file(request: web.Request) -> web.FileResponse:
        path = files.get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound()
        return web.FileResponse(path, headers=headers)

    return static_file
