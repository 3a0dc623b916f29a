"""The agent token API (CONTRACT §5), on the importer's port.

| request                       | answer                                                   |
|-------------------------------|----------------------------------------------------------|
| GET  /api/notes?pattern=GLOB  | 200 {"notes": [...]}, only paths the token may read       |
| GET  /api/notes/{path}        | 200 the note; 403 outside read_patterns; 404              |
| POST /api/notes {"changes"}   | 200 {"applied"}; 400 malformed; 403 outside write_patterns |
|                               | or too deep; 409 {"errors"} hash conflicts; 413 too large |

Every request needs `Authorization: Bearer <api_token>` (401 otherwise). Writes go through
the same checks and store as synchronous answers (imports.py), at the token's depth.
"""

from __future__ import annotations

import json
import unicodedata
import uuid
from typing import Any

import asyncpg
import structlog
from aiohttp import web

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock, iso
from cronhooks_common.events import Causation
from cronhooks_common.globs import like_prefix
from cronhooks_common.tokens import ApiClaims, ApiTokens, TokenError
from cronhooks_importer.imports import BATCHES, import_changes, verdict
from cronhooks_importer.rules import (
    CONFLICT,
    FORBIDDEN,
    INVALID,
    TOO_LARGE,
    allowed,
    path_problem,
    pattern_problem,
)

log = structlog.get_logger(__name__)

MAX_REQUEST_BYTES = 24 << 20
MAX_LISTED = 10_000
# Which status answers a rejected batch, by the kinds of its errors (first match wins).
STATUS_BY_KIND = ((INVALID, 400), (TOO_LARGE, 413), (FORBIDDEN, 403), (CONFLICT, 409))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def add_token_api(
    app: web.Application, *, pool: asyncpg.Pool, tokens: ApiTokens, clock: Clock
) -> None:
    def claims_of(request: web.Request) -> ApiClaims:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise web.HTTPUnauthorized(
                text=json.dumps({"error": "an api_token is required (Bearer)"}),
                content_type="application/json",
            )
        try:
            return tokens.verify(token.strip(), now=clock.now())
        except TokenError as exc:
            raise web.HTTPUnauthorized(
                text=json.dumps({"error": f"invalid api_token: {exc}"}),
                content_type="application/json",
            ) from None

    async def list_notes(request: web.Request) -> web.Response:
        claims = claims_of(request)
        pattern = request.query.get("pattern", "*")
        problem = pattern_problem(pattern)
        if problem is not None:
            return _error(400, f"pattern: {problem}")
        rows = await pool.fetch(
            "select path, content_hash, version, updated_at from importer.notes"
            " where path like $1 order by path",
            like_prefix(pattern),
        )
        notes = [
            {
                "path": r["path"],
                "content_hash": r["content_hash"],
                "version": r["version"],
                "updated_at": iso(r["updated_at"]),
            }
            for r in rows
            if allowed(r["path"], [pattern]) and allowed(r["path"], claims.read_patterns)
        ]
        return web.json_response({"notes": notes[:MAX_LISTED]})

    async def get_note(request: web.Request) -> web.Response:
        claims = claims_of(request)
        path = unicodedata.normalize("NFC", request.match_info["path"])
        problem = path_problem(path)
        if problem is not None:
            return _error(400, problem)
        if not allowed(path, claims.read_patterns):
            return _error(403, f"{path} is outside the token's read_patterns")
        row = await pool.fetchrow("select * from importer.notes where path = $1", path)
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
        claims = claims_of(request)
        if claims.max_depth is not None and claims.depth > claims.max_depth:
            return _error(
                403, f"token depth {claims.depth} exceeds the webhook's maxDepth {claims.max_depth}"
            )
        if request.content_length is not None and request.content_length > MAX_REQUEST_BYTES:
            return _error(413, f"request body is larger than {MAX_REQUEST_BYTES} bytes")
        try:
            body: Any = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            return _error(400, "request body must be JSON")
        if not isinstance(body, dict) or "changes" not in body:
            return _error(400, 'request body must be {"changes": [...]}')
        now = clock.now()
        causation = Causation.new(actor=claims.subject)
        writer = claims.subject + (f" delivery:{claims.delivery_id}" if claims.delivery_id else "")
        async with pool.acquire() as conn, conn.transaction():
            applied, errors = await import_changes(
                conn,
                body["changes"],
                write_patterns=list(claims.write_patterns),
                depth=claims.depth,
                max_depth=claims.max_depth or claims.depth,
                writer=writer,
                causation=causation,
                now=now,
            )
            common = {
                "delivery_id": claims.delivery_id,
                "writer": writer,
                "depth": claims.depth,
                "source": "token",
            }
            await eventstore.append(
                conn,
                f"push-{uuid.uuid4()}",
                [verdict(common, applied, errors)],
                expected_version=0,
                causation=causation,
                occurred_at=now,
            )
        BATCHES.labels("token", "rejected" if errors else "imported").inc()
        if errors:
            kinds = {e.kind for e in errors}
            status = next(code for kind, code in STATUS_BY_KIND if kind in kinds)
            return web.json_response({"errors": [e.to_json() for e in errors]}, status=status)
        return web.json_response({"applied": applied})

    app.router.add_get("/api/notes", list_notes)
    app.router.add_get("/api/notes/{path:.+}", get_note)
    app.router.add_post("/api/notes", push_notes)
