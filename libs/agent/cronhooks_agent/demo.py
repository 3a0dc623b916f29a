"""The demo agent of `make up`, built on this SDK: answers every delivery with a digest note.

POST /webhook → 200 with one new note `demo/digest-<delivery id>.md` (a `SyncAnswer`), if
the request carries a valid signature for its secret (`verify_webhook`), else 401: the demo
shows what an agent must do. GET /received shows the last 100 requests, with the exact
signed bytes; given a `store` file it keeps them there, so they survive a restart.

Its secret: DEMO_AGENT_SECRET, or one derived from CRONHOOKS_SECRET_KEY (`demo_secret`), so
that every `make up` on this checkout uses the same one without storing it anywhere else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

import structlog
from aiohttp import web

from cronhooks_agent.answers import SyncAnswer
from cronhooks_agent.webhooks import SignatureError, verify_webhook
from cronhooks_common.json_input import TooDeep, loads

log = structlog.get_logger(__name__)


class Received(TypedDict):
    """A request as GET /received shows it."""

    received_at: str
    headers: dict[str, str]
    body: object  # the JSON as sent, shown as it is
    raw_body: str


def demo_secret(master_key: str) -> str:
    """A webhook secret (`whsec_…`) for the demo agent, derived from the deployment's key:
    the same on every start, and it reveals nothing about the key."""
    derived = hmac.new(master_key.encode(), b"cronhooks demo agent", hashlib.sha256).digest()
    return "whsec_" + base64.b64encode(derived).decode()


KEPT = 100  # requests GET /received shows (and the store keeps)


def _load(store: Path | None) -> deque[Received]:
    try:
        kept = json.loads(store.read_text()) if store else []
    except (OSError, ValueError):  # none yet, or cut short: start empty
        kept = []
    return deque(kept if isinstance(kept, list) else [], maxlen=KEPT)


def _save(store: Path, received: deque[Received]) -> None:
    # Written whole and renamed: a crash leaves the old file or the new one, never half.
    partial = store.with_name(store.name + ".tmp")
    partial.write_text(json.dumps(list(received)))
    os.replace(partial, store)


def make_app(secret: str, store: Path | None = None) -> web.Application:
    if not secret:
        raise ValueError("secret: the demo agent verifies every request; give it one")
    received = _load(store)

    async def webhook(request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            verify_webhook(secret, request.headers, raw)
        except SignatureError as exc:
            message = f"{exc} (the demo agent verifies with the secret `make up` printed)"
            log.warning("demo_agent_refused", reason=str(exc))
            return web.json_response({"status": "error", "message": message}, status=401)
        try:
            body = loads(raw, what="request body")
        except TooDeep as exc:
            return web.json_response({"status": "error", "message": str(exc)}, status=400)
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
        if store is not None:
            _save(store, received)
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


async def serve(host: str, port: int, secret: str, store: Path | None = None) -> web.AppRunner:
    runner = web.AppRunner(make_app(secret, store), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
