"""A recording agent for benchmarks, run as its own process (`python -m bench.agent PORT`).

POST /hook → 200 at once, noting when each delivery id arrived; POST /api/cron/fire → 202.
GET /stats → {"received": {id: [unix times]}}; POST /reset clears it.
"""

from __future__ import annotations

import json
import sys
import time

from aiohttp import web

received: dict[str, list[float]] = {}


async def hook(request: web.Request) -> web.Response:
    at = time.time()
    body = json.loads(await request.read())
    received.setdefault(str(body.get("id", body.get("job_id"))), []).append(at)
    return web.Response(status=200)


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
    app.router.add_post("/api/cron/fire", fire)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    web.run_app(
        app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None, backlog=4096
    )


if __name__ == "__main__":
    main()
