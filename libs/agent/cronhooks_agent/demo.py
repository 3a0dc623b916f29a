"""The demo agent of `make up`, built on this SDK: answers every delivery with a digest note.

POST /webhook → 200 with one new note `demo/digest-<delivery id>.md` (a `SyncAnswer`).
If DEMO_AGENT_SECRET is set, requests must carry a valid signature (`verify_webhook`).
GET /received shows the last requests, with the exact signed bytes.
"""

from __future__ import annotations

import json
import os
from collections import deque
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web

from cronhooks_agent.answers import SyncAnswer
from cronhooks_agent.webhooks import SignatureError, verify_webhook

log = structlog.get_logger(__name__)


def make_app(secret: str | None = None) -> web.Application:
    received: deque[dict[str, Any]] = deque(maxlen=100)

    async def webhook(request: web.Request) -> web.Response:
        raw = await request.read()
        if secret:
            try:
                verify_webhook(secret, request.headers, raw)
            except SignatureError as exc:
                return web.json_response({"status": "error", "message": str(exc)}, status=401)
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"status": "error", "message": "not JSON"}, status=400)
        now = datetime.now(UTC).isoformat()
        received.append(
            {
                "received_at": now,
                "headers": dict(request.headers),
                "body": body,
                "raw_body": raw.decode("utf-8", "replace"),
            }
        )
        log.info("demo_agent_received", delivery_id=body.get("id"), attempt=body.get("attempt"))
        when = body.get("scheduled_for") or now
        digest = (
            f"# Digest for {when[:10]}\n\n"
            f"Instruction: {body.get('instruction', '')}\n\n"
            f"Delivery {body.get('id')}, attempt {body.get('attempt')}, "
            f"trigger {body.get('trigger')}.\n"
        )
        answer = SyncAnswer(message="wrote one digest").create(
            f"demo/digest-{body.get('id')}.md", digest
        )
        return web.json_response(answer.to_json())

    async def show(_: web.Request) -> web.Response:
        return web.json_response(list(received))

    app = web.Application()
    app.router.add_post("/webhook", webhook)
    app.router.add_get("/received", show)
    return app


async def serve(host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(make_app(os.environ.get("DEMO_AGENT_SECRET")), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
