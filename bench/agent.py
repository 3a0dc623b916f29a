"""A recording agent for benchmarks, run as its own process (`python -m bench.agent PORT
[PORT ...]`: the same app on every port, one record — the destinations bench's 100 ports).

POST /hook → 200 at once with a small report (CONTRACT §16.1: two costs, three log
entries, as an AI agent's answer carries them), noting when each delivery id arrived;
POST /hook/empty → an empty 200 (an answer that reports nothing);
POST /api/cron/fire → 202. GET /stats → {"received": {id: [unix times]}}; POST /reset
clears it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import web

received: dict[str, list[float]] = {}

# What the herd's agent answers (issue 39's bench: the hot path with costs and logs).
REPORT = json.dumps(
    {
        "status": "ok",
        "costs": {"tokens": 812, "usd": 0.0009},
        "logs": [
            {"ts": "2026-12-07T09:00:00Z", "level": "info", "msg": "read 3 notes"},
            {"level": "debug", "msg": "model call", "data": {"model": "small", "ms": 412}},
            {"level": "info", "msg": "nothing to change"},
        ],
    }
).encode()


async def hook(request: web.Request) -> web.Response:
    _note(json.loads(await request.read()))
    return web.Response(status=200, body=REPORT, content_type="application/json")


async def hook_empty(request: web.Request) -> web.Response:
    _note(json.loads(await request.read()))
    return web.Response(status=200)


def _note(body: dict[str, object]) -> None:
    at = time.time()
    received.setdefault(str(body.get("id", body.get("job_id"))), []).append(at)


async def fire(request: web.Request) -> web.Response:
    at = time.time()
    body = json.loads(await request.read())
    received.setdefault(str(body["job_id"]), []).append(at)
    return web.json_response({"status": "accepted"}, status=202)


async def stats(_: web.Request) -> web.Response:
    return web.json_response({"received": received})


async def reset(_: web.Request) -> web.Response:
    received.clear()
    return web.json_response({"ok": True})


def main() -> None:
    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_post("/hook/empty", hook_empty)
    app.router.add_post("/api/cron/fire", fire)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    ports = [int(port) for port in sys.argv[1:]]
    if len(ports) == 1:
        web.run_app(app, host="127.0.0.1", port=ports[0], access_log=None, print=None, backlog=4096)
    else:
        asyncio.run(_serve(app, ports))


async def _serve(app: web.Application, ports: list[int]) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for port in ports:
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    await asyncio.Event().wait()  # until terminated


if __name__ == "__main__":
    main()
