"""The run endpoints of the agent token API (CONTRACT §16.2), on the importer's port.

| request                                   | answer                                         |
|-------------------------------------------|------------------------------------------------|
| POST /api/runs/current                    | 200 {"run": {"state", "finished_at"}}; the same |
|   {"status": "ok"|"error", "message",     | report again: the same 200; 409 another report  |
|    "costs", "logs"}                       | after the end; 400 naming the field; 404 no run |
| POST /api/runs/current/heartbeat          | 200 {"deadline"}; 409 after the end; 404 no run |
|   (optional {"logs": [...]})              |                                                |

`Authorization: Bearer <api_token>` of the delivery whose run it is (401 when missing,
forged or tampered with, or when its webhook is deleted or disabled). Unlike the note
routes, these accept a token whose `exp` has passed while its run is RUNNING: the run's
deadline bounds it. runs.py does the work.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from cronhooks_common.http_limits import TOKEN_API_BODY_BYTES, BodyRefused, read_body
from cronhooks_common.json_input import TooDeep, loads
from cronhooks_common.refusals import log_refused
from cronhooks_common.tokens import TokenError
from cronhooks_importer.callers import Callers, Unauthorized
from cronhooks_importer.run_reports import BadReport, heartbeat_logs, report_of
from cronhooks_importer.runs import Answer, Runs


def _json(answer: Answer) -> web.Response:
    return web.json_response(answer.body, status=answer.status)


def _refused(status: int, message: str, field: str | None = None) -> web.Response:
    log_refused("run_api_refused", field=field or "token", reason=message)
    body = {"error": message} | ({"field": field} if field else {})
    return web.json_response(body, status=status)


def add_run_api(app: web.Application, *, runs: Runs, callers: Callers) -> None:
    async def who(request: web.Request) -> tuple[int | None, bool]:
        """The delivery whose token calls, and whether the token has expired."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("an api_token (Bearer) is required")
        now = callers.clock.now()
        try:
            claims = callers.tokens.verify(token, now=now, allow_expired=True)
        except TokenError as exc:
            raise Unauthorized(f"invalid api_token: {exc}") from None
        await callers.token_caller(token, claims)  # its webhook must be live (§15)
        return claims.delivery_id, claims.expires_at <= now

    async def body_of(request: web.Request, *, optional: bool) -> Any:
        raw = await read_body(request, TOKEN_API_BODY_BYTES)
        if optional and not raw.strip():
            return None
        return loads(raw, what="request body")

    async def answered(request: web.Request, heartbeat: bool) -> web.Response:
        try:
            delivery_id, expired = await who(request)
            body = await body_of(request, optional=heartbeat)
            if heartbeat:
                logs = heartbeat_logs(body)
            else:
                report = report_of(body)
        except Unauthorized as exc:
            return _refused(401, str(exc))
        except BodyRefused as exc:
            raise exc.http_error({"error": str(exc)}) from None
        except TooDeep as exc:
            return _refused(400, str(exc), "body")
        except (ValueError, UnicodeDecodeError) as exc:
            if isinstance(exc, BadReport):
                return _refused(400, str(exc), exc.field)
            return _refused(400, "request body must be JSON", "body")
        if not isinstance(delivery_id, int) or isinstance(delivery_id, bool):
            return _json(Answer(404, {"error": "no run: this token names no delivery"}))
        if heartbeat:
            return _json(await runs.heartbeat(delivery_id, logs, expired=expired))
        return _json(await runs.report(delivery_id, report, expired=expired))

    async def report_run(request: web.Request) -> web.Response:
        return await answered(request, heartbeat=False)

    async def beat(request: web.Request) -> web.Response:
        return await answered(request, heartbeat=True)

    app.router.add_post("/api/runs/current", report_run)
    app.router.add_post("/api/runs/current/heartbeat", beat)
