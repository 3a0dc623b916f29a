"""The agent GraphQL API (CONTRACT §5) on the importer: `POST /graphql`, schema-first
(graphql/agent.graphql), trip2g's operation names. Resolvers are thin: every read and
write goes through agent_notes.py, the same code path as the REST routes.

A missing or forged token is HTTP 401; a rule violation is an `ErrorPayload` (one
`NoteError` per offending path) and writes nothing; GraphQL's own input errors and bad
arguments are `BAD_USER_INPUT` with `extensions.field`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from ariadne import (
    MutationType,
    QueryType,
    UnionType,
    graphql,
    load_schema_from_path,
    make_executable_schema,
)
from graphql import GraphQLError, GraphQLResolveInfo, GraphQLSchema

from cronhooks_common.globs import pattern_problem
from cronhooks_common.graphql_limits import Documents, LimitedRequest
from cronhooks_common.graphql_support import bad_input, datetime_scalar, silence_ariadne_logger
from cronhooks_common.http_limits import TOKEN_API_BODY_BYTES, BodyRefused, read_body
from cronhooks_common.json_input import TooDeep, loads
from cronhooks_common.note_inputs import HideNotesInput, PushNotesInput
from cronhooks_common.paths import path_problem
from cronhooks_common.refusals import log_refused
from cronhooks_importer.agent_notes import AgentNotes, WriteResult
from cronhooks_importer.callers import Caller, Callers, Unauthorized
from cronhooks_importer.rules import CONTENT_REQUIRED

MAX_ERRORS_IN_MESSAGE = 5

query = QueryType()
mutation = MutationType()


@dataclass(frozen=True, slots=True)
class AgentContext:
    caller: Caller
    notes: AgentNotes


Info = GraphQLResolveInfo[AgentContext]


def _ctx(info: Info) -> tuple[Caller, AgentNotes]:
    return info.context.caller, info.context.notes


@query.field("notePaths")
async def resolve_note_paths(_: Any, info: Info, pattern: str = "*") -> list[Any]:
    caller, notes = _ctx(info)
    problem = pattern_problem(pattern)
    if problem is not None:
        raise bad_input("pattern", problem)
    return [
        {
            "path": r["path"],
            "latest_content_hash": r["content_hash"],
            "version": r["version"],
            "updated_at": r["updated_at"],
        }
        for r in await notes.readable(caller, pattern)
    ]


@query.field("note")
async def resolve_note(_: Any, info: Info, path: str) -> Any:
    caller, notes = _ctx(info)
    problem = path_problem(path)
    if problem is not None:
        raise bad_input("path", problem)
    if not caller.may_read(path):
        raise GraphQLError(
            f"{path} is outside the token's read_patterns", extensions={"code": "FORBIDDEN"}
        )
    row = await notes.get(path)
    return None if row is None else dict(row)


def _error_payload(result: WriteResult) -> dict[str, object]:
    errors = [e.to_json() for e in result.errors]
    shown = "; ".join(
        f"{e['path']}: {e['error']}" if e["path"] else e["error"]
        for e in errors[:MAX_ERRORS_IN_MESSAGE]
    )
    more = len(result.errors) - MAX_ERRORS_IN_MESSAGE
    return {
        "__typename": "ErrorPayload",
        "message": f"rejected, nothing written: {shown}" + (f" (+{more} more)" if more > 0 else ""),
        "errors": errors,
    }


@mutation.field("pushNotes")
async def resolve_push_notes(_: Any, info: Info, input: PushNotesInput) -> Any:
    caller, notes = _ctx(info)
    # Change items as the token API takes them (the same keys, snake_case): the rules judge
    # every value, and a write without content is refused with GraphQL's own wording.
    updates = [dict(u) for u in input["updates"]]
    write = notes.stage if input.get("skip_commit") else notes.push
    result = await write(caller, updates, no_content=CONTENT_REQUIRED)
    if result.errors:
        return _error_payload(result)
    return {
        "__typename": "PushNotesPayload",
        "notes": [
            {
                "id": result.ids[a.path],
                "path": a.path,
                "content_hash": a.content_hash,
                "version": a.version,
                "assets": [],
            }
            for a in result.applied
        ],
    }


@mutation.field("commitNotes")
async def resolve_commit_notes(_: Any, info: Info) -> Any:
    caller, notes = _ctx(info)
    result = await notes.commit(caller)
    if result.errors:
        return _error_payload(result)
    return {"__typename": "CommitNotesPayload", "success": True}


@mutation.field("hideNotes")
async def resolve_hide_notes(_: Any, info: Info, input: HideNotesInput) -> Any:
    caller, notes = _ctx(info)
    result = await notes.hide(caller, [{"path": p} for p in input["paths"]])
    if result.errors:
        return _error_payload(result)
    return {"__typename": "HideNotesPayload", "paths": [a.path for a in result.applied]}


def _typename(obj: Mapping[str, object], *_: Any) -> str:
    return str(obj["__typename"])


def build_agent_schema() -> GraphQLSchema:
    unions = [
        UnionType(name, _typename)
        for name in (
            "PushNotesOrErrorPayload",
            "CommitNotesOrErrorPayload",
            "HideNotesOrErrorPayload",
        )
    ]
    return make_executable_schema(
        load_schema_from_path(str(Path(__file__).parent / "graphql")),
        datetime_scalar,
        query,
        mutation,
        *unions,
        convert_names_case=True,
    )


def _errors(status: int, code: str, message: str, **extensions: str) -> web.Response:
    return web.json_response(
        {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]},
        status=status,
    )


def add_agent_graphql(app: web.Application, *, notes: AgentNotes, callers: Callers) -> None:
    schema = build_agent_schema()
    ariadne_logger = silence_ariadne_logger()
    documents = Documents()

    async def execute(request: web.Request) -> web.Response:
        try:
            caller = await callers.of(request)
        except Unauthorized as exc:
            return _errors(401, "UNAUTHENTICATED", str(exc))
        try:
            data: Any = loads(await read_body(request, TOKEN_API_BODY_BYTES), what="request body")
        except BodyRefused as exc:
            body = {"errors": [{"message": str(exc), "extensions": {"code": exc.code}}]}
            raise exc.http_error(body) from None
        except TooDeep as exc:
            log_refused("graphql_error", field="body", reason=str(exc), code="BAD_REQUEST")
            return _errors(400, "BAD_REQUEST", str(exc), field="body")
        except (ValueError, UnicodeDecodeError):
            log_refused("graphql_error", field="body", reason="not JSON", code="BAD_REQUEST")
            return _errors(400, "BAD_REQUEST", "request body must be JSON")
        if not isinstance(data, dict):
            log_refused("graphql_error", field="body", reason="not an object", code="BAD_REQUEST")
            return _errors(400, "BAD_REQUEST", "request body must be a JSON object")
        limited = LimitedRequest(documents)
        success, result = await graphql(
            schema,
            data,
            context_value=AgentContext(caller, notes),
            debug=False,
            query_parser=limited.query_parser,  # the limits of CONTRACT §15, then a cache
            query_validator=documents.validate,
            error_formatter=limited.format_error,
            logger=ariadne_logger,
        )
        return web.json_response(result, status=200 if success or "data" in result else 400)

    app.router.add_post("/graphql", execute)
