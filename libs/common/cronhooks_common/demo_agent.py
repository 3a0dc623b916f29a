"""A demo agent for `make up`: a real HTTP server that answers with a small digest note.

POST /webhook → 200 {"status": "ok", "changes": [{"path": "demo/digest-<id>.md", ...}]}.
It records what it received at GET /received (for a quick look, not for production).
"""

from __future__ import annotations

import json
from collections import deque
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web

log = structlog.get_logger(__name__)


def make_app() -> web.Application:
    received: deque[dict[str, Any]] = deque(maxlen=100)

    async def webhook(request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"status": "error", "message": "not JSON"}, status=400)
        entry = {
            "received_at": datetime.now(UTC).isoformat(),
            "headers": {
                k: v for k, v in request.headers.items() if k.lower().startswith(("x-", "webhook-"))
            },
            "body": body,
            "raw_body": raw.decode("utf-8", "replace"),  # the signed bytes, for checking
        }
        received.append(entry)
        log.info("demo_agent_received", delivery_id=body.get("id"), attempt=body.get("attempt"))
        when = body.get("scheduled_for") or entry["received_at"]
        digest = (
            f"# Digest for {when[:10]}\n\n"
            f"Instruction: {body.get('instruction', '')}\n\n"
            f"Delivery {body.get('id')}, attempt {body.get('attempt')}, "
            f"trigger {body.get('trigger')}.\n"
        )
        return web.json_response(
            {
                "status": "ok",
                "message": "wrote one digest",
                "changes": [
                    {
                        "path": f"demo/digest-{body.get('id')}.md",
                        "content": digest,
                        "expected_hash": "",
                    }
                ],
            }
        )

    async def show(_: web.Request) -> web.Response:
        return web.json_response(list(received))

    app = web.Application()
    app.router.add_post("/webhook", webhook)
    app.router.add_get("/received", show)
    return app


async def serve(host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
