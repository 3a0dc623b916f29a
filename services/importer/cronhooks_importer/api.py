"""The agent token API (CONTRACT §5), on the importer's port.

| request                          | answer                                                   |
|----------------------------------|----------------------------------------------------------|
| GET    /api/notes?pattern=GLOB   | 200 {"notes": [...]}, only paths the token may read       |
| GET    /api/notes/{path}         | 200 the note; 403 outside read_patterns; 404              |
| POST   /api/notes {"changes"}    | 200 {"applied"}; 400 malformed; 403 outside write_patterns |
|                                  | or too deep; 409 {"errors"} hash conflicts; 413 too large |
| DELETE /api/notes/{path}         | 200 {"removed": {"path", "version"}}; 404; 403; 409       |
|        (?expected_hash=)         |                                                          |

Every request needs `Authorization: Bearer <api_token>` (401 otherwise). Everything goes
through agent_notes.py, the same code path as the agent GraphQL API.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import msgspec
import structlog
from aiohttp import web

from cronhooks_common.clock import iso
from cronhooks_common.globs import pattern_problem
from cronhooks_common.http_limits import TOKEN_API_BODY_BYTES, BodyRefused, read_body
from cronhooks_common.json_input import TooDeep, loads
from cronhooks_common.paths import path_problem
from cronhooks_common.refusals import log_refused
from cronhooks_importer.agent_notes import AgentNotes, WriteResult
from cronhooks_importer.callers import Caller, Callers, Unauthorized
from cronhooks_importer.rules import CONFLICT, FORBIDDEN, INVALID, MISSING, TOO_LARGE

log = structlog.get_logger(__name__)

# Which status answers a rejected batch, by the kinds of its errors (first match wins).
STATUS_BY_KIND = (
    (INVALID, 400),
    (TOO_LARGE, 413),
    (FORBIDDEN, 403),
    (MISSING, 404),
    (CONFLICT, 409),
)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _rejected(result: WriteResult) -> web.Response:
    """`errors`: one per offending change; `error`: the first of them, as one line."""
    kinds = {e.kind for e in result.errors}
    status = next(code for kind, code in STATUS_BY_KIND if kind in kinds)
    errors = [e.to_json() for e in result.errors]
    first = errors[0]
    return web.json_response(
        {
            "error": f"{first['path']}: {first['error']}" if first["path"] else first["error"],
            "errors": errors,
        },
        status=status,
    )


def note_path(request: web.Request) -> str:
    """The `{path}` of the URL, NFC-normalised, or 400 naming the rule it breaks."""
    raw = request.match_info["path"]
    problem = path_problem(raw)
    if problem is not None:
        log_refused("token_api_refused", field="path", reason=problem)
        raise web.HTTPBadRequest(
            text=json.dumps({"error": problem}), content_type="application/json"
        )
    return unicodedata.normalize("NFC", raw)


def add_token_api(app: web.Application, *, notes: AgentNotes, callers: Callers) -> None:
    async def caller(request: web.Request) -> Caller:
        try:
            return await callers.of(request)
        except Unauthorized as exc:
            raise web.HTTPUnauthorized(
                text=json.dumps({"error": str(exc)}), content_type="application/json"
            ) from None

    async def list_notes(request: web.Request) -> web.Response:
        who = await caller(request)
        pattern = request.query.get("pattern", "*")
        problem = pattern_problem(pattern)
        if problem is not None:
            log_refused("token_api_refused", field="pattern", reason=problem)
            return _error(400, f"pattern: {problem}")
        rows = await notes.readable(who, pattern)
        return web.json_response(
            {
                "notes": [
                    {
                        "path": r["path"],
                        "content_hash": r["content_hash"],
                        "version": r["version"],
                        "updated_at": iso(r["updated_at"]),
                    }
                    for r in rows
                ]
            }
        )

    async def get_note(request: web.Request) -> web.Response:
        who = await caller(request)
        path = note_path(request)
        if not who.may_read(path):
            return _error(403, f"{path} is outside the token's read_patterns")
        row = await notes.get(path)
        if row is None:
            return _error(404, f"no note at {path}")
        return web.json_response(
            {
                "path": row["path"],
                "content": row["content"],
                "content_hash": row["content_hash"],
                "version": row["version"],
                "depth": row["depth"],
                "updated_at": iso(row["updated_at"]),
            }
        )

    async def push_notes(request: web.Request) -> web.Response:
        who = await caller(request)
        try:
            body: Any = loads(await read_body(request, TOKEN_API_BODY_BYTES), what="request body")
        except BodyRefused as exc:
            raise exc.http_error({"error": str(exc)}) from None
        except TooDeep as exc:
            log_refused("token_api_refused", field="body", reason=str(exc))
            return _error(400, str(exc))
        except (ValueError, UnicodeDecodeError):
            log_refused("token_api_refused", field="body", reason="not JSON")
            return _error(400, "request body must be JSON")
        if not isinstance(body, dict) or "changes" not in body:
            log_refused("token_api_refused", field="changes", reason="is required")
            return _error(400, 'request body must be {"changes": [...]}')
        result = await notes.push(who, body["changes"])
        if result.errors:
            return _rejected(result)
        applied = msgspec.to_builtins([a.change for a in result.applied])
        return web.json_response({"applied": applied})

    async def remove_note(request: web.Request) -> web.Response:
        who = await caller(request)
        path = note_path(request)
        removal = {"path": path}  # judged by parse_removals, as any input
        if "expected_hash" in request.query:
            removal["expected_hash"] = request.query["expected_hash"]
        result = await notes.hide(who, [removal])
        if result.errors:
            return _rejected(result)
        [removed] = result.applied
        return web.json_response({"removed": {"path": removed.path, "version": removed.version}})

    app.router.add_get("/api/notes", list_notes)
    app.router.add_get(r"/api/notes/{path:[\s\S]+}", get_note)
    app.router.add_delete(r"/api/notes/{path:[\s\S]+}", remove_note)
    app.router.add_post("/api/notes", push_notes)
