"""The debug endpoints (CONTRACT §12) on the running services: the admin-api's own
/debug/test_webhook as the agent of real deliveries, wait_all_jobs judged from the
database, run_cron_job, and 404 for all of them without dev mode."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
import structlog
from standardwebhooks.webhooks import Webhook

from cronhooks_common import jsonfast
from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.support.flows import (
    create_change_webhook,
    create_webhook,
    delivery,
    events_of,
    retry_due,
)
from tests.support.inprocess import Running, admin_token, eventually, running, window_start
from tests.support.system import System

DEBUG_ROUTES = [
    ("POST", "/debug/test_webhook"),
    ("GET", "/debug/test_webhook_calls"),
    ("DELETE", "/debug/test_webhook_calls"),
    ("POST", "/debug/wait_all_jobs"),
    ("GET", "/debug/wait_all_jobs"),
    ("POST", "/debug/run_cron_job?id=1"),
]


async def call(
    r: Running, method: str, path: str, **kwargs: Any
) -> tuple[int, str, bytes, dict[str, str]]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, r.urls["admin-api"] + path, **kwargs) as resp,
    ):
        return resp.status, resp.content_type, await resp.read(), dict(resp.headers)


async def json_of(r: Running, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    status, _, raw, _ = await call(r, method, path, **kwargs)
    return status, jsonfast.loads(raw)


async def calls(r: Running, query: str = "") -> list[dict[str, Any]]:
    status, body = await json_of(r, "GET", "/debug/test_webhook_calls" + query)
    assert status == 200, body
    return body["calls"]  # type: ignore[no-any-return]


# Every service, dev mode on, signatures verifiable against the real clock.
DEV_MODE = pytest.mark.system(start=window_start, settings={"dev_mode": True})


async def test_without_dev_mode_every_debug_route_is_an_unknown_route(settings: Settings) -> None:
    assert settings.dev_mode is False
    async with running(settings, ManualClock(datetime.now(UTC)), ("admin-api",)) as r:
        assert r.services["admin-api"].debug is None
        unknown = await call(r, "POST", "/debug/no_such_route")
        assert unknown[0] == 404
        for method, path in DEBUG_ROUTES:
            status, content_type, body, _ = await call(r, method, path, data=b"{}")
            assert (status, content_type, body) == unknown[:3], (method, path)


async def test_dev_mode_says_so_at_start(settings: Settings) -> None:
    settings = dataclasses.replace(settings, dev_mode=True)
    with structlog.testing.capture_logs() as logs:
        async with running(settings, ManualClock(datetime.now(UTC)), ("admin-api",)):
            pass
    [warning] = [e for e in logs if e["event"] == "dev_mode_enabled"]
    assert warning["log_level"] == "warning"
    assert "without authentication" in warning["detail"]


@DEV_MODE
async def test_a_failed_delivery_to_the_sink_is_recorded_signed_and_waited_for(
    system: System,
) -> None:
    url = system.urls["admin-api"] + "/debug/test_webhook?status=500&body=agent%20down"
    hook_id, secret = await create_webhook(system, system.admin, url, instruction="digest")
    status, started = await json_of(system, "POST", f"/debug/run_cron_job?id={hook_id}")
    assert status == 200 and started["webhook_id"] == hook_id, started

    status, content_type, text, _ = await call(system, "POST", "/debug/wait_all_jobs")
    assert (status, content_type) == (200, "text/plain")
    assert text.decode().startswith("ok:")
    # Nothing pending means ended, and the read models already say how.
    d = await delivery(system, system.admin, started["delivery_id"])
    assert (d["status"], d["trigger"], d["responseStatus"]) == ("failed", "MANUAL", 500)
    assert d["attempts"][0]["responseBody"] == "agent down"

    [got] = await calls(system)
    assert (got["method"], got["path"]) == ("POST", "/debug/test_webhook")
    assert got["query"] == {"status": "500", "body": "agent down"}
    assert datetime.fromisoformat(got["received_at"]) >= window_start()
    body = got["body"]
    assert (body["id"], body["webhook_id"], body["trigger"]) == (
        started["delivery_id"],
        hook_id,
        "manual",
    )
    raw = jsonfast.dumps_bytes(body)  # the bytes sent: compact JSON, keys in their order
    headers = got["headers"]
    expected = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    assert headers["X-Webhook-Signature"] == expected
    assert Webhook(secret).verify(raw, headers)["id"] == started["delivery_id"]
    assert headers["Content-Type"] == "application/json"


@DEV_MODE
async def test_wait_all_jobs_waits_for_a_retry_due_on_the_clock(system: System) -> None:
    url = system.urls["admin-api"] + "/debug/test_webhook?status=503"
    hook_id, _ = await create_webhook(system, system.admin, url, maxRetries=1)
    _, started = await json_of(system, "GET", f"/debug/run_cron_job?id={hook_id}")  # GET, as trip2g
    delivery_id = started["delivery_id"]

    waiting = asyncio.create_task(call(system, "POST", "/debug/wait_all_jobs"))
    due = await eventually(lambda: retry_due(system.dsn, delivery_id))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "a delivery waiting for its retry is pending"
    assert len(await calls(system)) == 1
    system.clock.set(due + timedelta(milliseconds=5))
    status, _, text, _ = await asyncio.wait_for(waiting, 20)
    assert status == 200 and text.startswith(b"ok:")
    assert [c["body"]["attempt"] for c in await calls(system)] == [1, 2]
    assert (await delivery(system, system.admin, delivery_id))["status"] == "failed"


async def test_wait_all_jobs_times_out_naming_what_is_pending(settings: Settings) -> None:
    """Only admin-api runs: the requested delivery is never sent, which the database says
    (no process holds it in memory); after the wait the answer is 504 and names it."""
    settings = dataclasses.replace(settings, dev_mode=True)
    async with running(settings, ManualClock(datetime.now(UTC)), ("admin-api",)) as r:
        token = await admin_token(settings.database_url)
        r.services["admin-api"].debug.wait_seconds = 0.3
        hook_id, _ = await create_webhook(r, token, "http://127.0.0.1:9/hook")
        _, started = await json_of(r, "POST", f"/debug/run_cron_job?id={hook_id}")
        assert started["delivery_id"] > 0
        # The projector is caught up (on a busy machine it may still be applying the
        # request): what stays pending is the delivery alone.
        assert await r.services["admin-api"].projector.caught_up()

        status, content_type, text, _ = await call(r, "POST", "/debug/wait_all_jobs")
        assert (status, content_type) == (504, "text/plain")
        assert text.decode() == ("timeout: still pending after 0.3 s: 1 deliveries not ended\n"), (
            text
        )
        status, body = await json_of(
            r, "GET", "/debug/wait_all_jobs", headers={"Accept": "application/json"}
        )
        assert status == 504
        assert (body["ok"], body["pending"]) == (False, {"deliveries": 1})


@DEV_MODE
async def test_the_sink_answers_as_told_and_refuses_bad_parameters(system: System) -> None:
    routes = system.services["admin-api"].debug
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # the delay, without waiting for it
        slept.append(seconds)

    routes.sleep = sleep
    status, content_type, body, _ = await call(
        system, "POST", '/debug/test_webhook?status=201&delay=1.5s&body={"status":"ok"}', data=b"x"
    )
    assert (status, content_type, body) == (201, "application/json", b'{"status":"ok"}')
    status, content_type, body, _ = await call(
        system,
        "POST",
        "/debug/test_webhook?delay=250ms",
        data=b"hello",
        headers={"Content-Type": "text/x-note"},
    )
    assert (status, content_type, body) == (200, "text/x-note", b"hello")  # echoed
    assert slept == [1.5, 0.25]

    for query, field in [
        ("status=99", "status"),
        ("status=abc", "status"),
        ("status=600", "status"),
        ("delay=2", "delay"),
        ("delay=-1s", "delay"),
        ("delay=61s", "delay"),
        ("delay=1m1.5s", "delay"),
    ]:
        status, answer = await json_of(system, "POST", f"/debug/test_webhook?{query}", data=b"{}")
        assert status == 400 and answer["field"] == field, (query, answer)
        assert answer["error"].startswith(f"{field}: "), answer
    status, _, _, _ = await call(
        system, "POST", "/debug/test_webhook", data=b"x" * (4 * 1024 * 1024 + 1)
    )
    assert status == 413

    recorded = await calls(system)
    assert [c["body"] for c in recorded] == ["x", "hello"]  # refused calls are not kept
    assert recorded[1]["headers"]["Content-Type"] == "text/x-note"
    assert [c["body"] for c in await calls(system, "?last=1")] == ["hello"]
    for bad in ("0", "-1", "x", ""):
        status, answer = await json_of(system, "GET", f"/debug/test_webhook_calls?last={bad}")
        assert status == 400 and answer["field"] == "last", answer
    status, answer = await json_of(system, "DELETE", "/debug/test_webhook_calls")
    assert (status, answer) == (200, {"ok": True, "cleared": 2})
    assert await calls(system) == []


@DEV_MODE
async def test_run_cron_job_is_trigger_cron_webhook(system: System) -> None:
    hook_id, _ = await create_webhook(
        system, system.admin, system.urls["admin-api"] + "/debug/test_webhook"
    )
    for query in ("", "?id=", "?id=abc", "?id=0", "?id=-3", "?id=99999999999999999999"):
        status, answer = await json_of(system, "POST", f"/debug/run_cron_job{query}")
        assert status == 400 and answer["field"] == "id", (query, answer)
    status, answer = await json_of(system, "POST", "/debug/run_cron_job?id=987654")
    assert (status, answer) == (404, {"error": "webhook 987654 not found"})

    change_id, _ = await create_change_webhook(
        system, system.admin, "https://agent.example/hook", includePatterns=["*"]
    )
    status, _ = await json_of(system, "POST", f"/debug/run_cron_job?id={change_id}")
    assert status == 404  # triggerCronWebhook knows cron webhooks only

    status, answer = await json_of(system, "POST", f"/debug/run_cron_job?id={hook_id}")
    assert status == 200
    # The stream opens with the request; the dispatcher may already have appended the
    # outcome by the time it is read, so only its first event is pinned here.
    requested = (await events_of(system.dsn, f"delivery-{answer['delivery_id']}"))[0]
    assert requested["type"] == "delivery.requested"
    assert (requested["data"]["trigger"], requested["data"]["scheduled_for"]) == ("manual", None)
    await call(system, "POST", "/debug/wait_all_jobs")

    await system.graphql(system.admin, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}")
    status, answer = await json_of(system, "POST", f"/debug/run_cron_job?id={hook_id}")
    assert (status, answer) == (404, {"error": f"webhook {hook_id} not found"})
