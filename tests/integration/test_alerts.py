"""Alerts (CONTRACT §12) on the running services: a real agent that fails, then recovers,
and a real alert sink on loopback that verifies every POST with the `standardwebhooks`
library (and trip2g's header). Time is a ManualClock kept near the real clock, so the
signatures' timestamps stay within the verifier's tolerance."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import ClientSession, web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from cronhooks_common.signing import generate_secret
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, finished, trigger
from tests.support.inprocess import Running, admin_token, eventually, running

ALERTS = """query($open: Boolean) { alerts(open: $open) {
  id webhookId kind raisedAt resolvedAt consecutiveFailures lastError disabled } }"""
UPDATE = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
  cronWebhook { enabled } } }"""


@dataclass
class Sink:
    """The operator's alert receiver: verifies, then answers as scripted (204 by default)."""

    agent: Agent
    secret: str
    answers: list[int] = field(default_factory=list)
    verified: list[Received] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.agent.port}/alerts"

    async def answer(self, _: web.Request, got: Received) -> web.StreamResponse:
        try:
            Webhook(self.secret).verify(got.raw, got.headers)
        except WebhookVerificationError:
            return web.Response(status=401)
        expected = "sha256=" + hmac.new(self.secret.encode(), got.raw, hashlib.sha256).hexdigest()
        if got.headers["X-Webhook-Signature"] != expected:
            return web.Response(status=401)
        self.verified.append(got)
        return web.Response(status=self.answers.pop(0) if self.answers else 204)

    def posts(self) -> list[Received]:
        return self.agent.at("alerts")


@dataclass
class System:
    r: Running
    token: str
    clock: ManualClock
    agent: Agent
    sink: Sink
    dsn: str

    async def alerts(self, open: bool | None = None) -> list[dict[str, Any]]:
        _, body = await self.r.graphql(self.token, ALERTS, {"open": open})
        assert "errors" not in body, body
        return body["data"]["alerts"]  # type: ignore[no-any-return]

    async def run(self, webhook_id: int, times: int = 1) -> None:
        for _ in range(times):
            await finished(self.r, self.token, await trigger(self.r, self.token, webhook_id))


def near_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


async def _system(settings: Settings, *, with_url: bool) -> AsyncIterator[System]:
    agent = await Agent().start()
    sink = Sink(agent, generate_secret())
    agent.url_for("alerts", sink.answer)
    if with_url:
        settings = dataclasses.replace(
            settings, alert_webhook_url=sink.url, alert_webhook_secret=sink.secret
        )
    settings = dataclasses.replace(settings, auto_disable_after=5)
    clock = ManualClock(near_now())
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        yield System(r, token, clock, agent, sink, settings.database_url)
    await agent.stop()


@pytest.fixture
async def system(settings: Settings) -> AsyncIterator[System]:
    async for s in _system(settings, with_url=True):
        yield s


@pytest.fixture
async def quiet_system(settings: Settings) -> AsyncIterator[System]:
    async for s in _system(settings, with_url=False):
        yield s


def scripted(codes: list[int]) -> Callable[[web.Request, Received], Any]:
    """An agent answering these statuses in turn, then 200."""

    async def answer(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=codes.pop(0) if codes else 200, text="down")

    return answer


async def open_alert(s: System, **expected: Any) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        alerts = await s.alerts(open=True)
        match = [a for a in alerts if all(a[k] == v for k, v in expected.items())]
        return match[0] if match else None

    return await eventually(found)  # type: ignore[no-any-return]


async def test_raised_after_three_failures_and_resolved_by_the_first_success(
    system: System,
) -> None:
    s = system
    url = s.agent.url_for("flaky", scripted([500, 500, 500]))
    hook, _ = await create_webhook(s.r, s.token, url, description="nightly digest")
    await s.run(hook, 2)
    assert await s.alerts(open=True) == [] and s.sink.posts() == []

    await s.run(hook)  # the third failure in a row
    [raised] = await s.sink.agent.wait_for(1, name="alerts")
    body = raised.body
    assert raised.headers["webhook-id"] == f"alert-{body['alert_id']}-raised"
    assert raised.headers["X-Webhook-ID"] == raised.headers["webhook-id"]
    expected = {
        "type": "alert.raised",
        "webhook_id": hook,
        "kind": "cron",
        "url": url,
        "description": "nightly digest",
        "consecutive_failures": 3,
        "last_error": "HTTP 500: down",
        "disabled": False,
    }
    assert {k: body[k] for k in expected} == expected
    assert body["admin_url"] == f"http://127.0.0.1:8080/#webhook-{hook}"  # CRONHOOKS_PUBLIC_URL
    assert "\n" not in body["text"] and "3 consecutive failed deliveries" in body["text"]
    alert = await open_alert(s, webhookId=hook)
    assert alert == {
        "id": body["alert_id"],
        "webhookId": hook,
        "kind": "cron",
        "raisedAt": alert["raisedAt"],
        "resolvedAt": None,
        "consecutiveFailures": 3,
        "lastError": "HTTP 500: down",
        "disabled": False,
    }

    await s.run(hook)  # a fourth failure says nothing new
    await s.run(hook)  # the agent answers 200 again: recovered
    posts = await s.sink.agent.wait_for(2, name="alerts")
    resolved = posts[1].body
    assert posts[1].headers["webhook-id"] == f"alert-{body['alert_id']}-resolved"
    assert resolved["type"] == "alert.resolved" and resolved["consecutive_failures"] == 0
    assert resolved["webhook_id"] == hook and resolved["disabled"] is False
    assert "RESOLVED" in resolved["text"]

    async def closed() -> list[dict[str, Any]]:
        return [a for a in await s.alerts(open=False) if a["id"] == body["alert_id"]]

    [done] = await eventually(closed)
    assert done["resolvedAt"] is not None and done["consecutiveFailures"] == 0
    assert await s.alerts(open=True) == []
    assert [a["id"] for a in await s.alerts()] == [body["alert_id"]]
    assert len(s.sink.verified) == len(s.sink.posts()) == 2
    types = [e["type"] for e in await events_of(s.dsn, f"alert-{body['alert_id']}")]
    assert types == ["alert.raised", "alert.resolved"]


async def test_disabling_reenabling_gone_and_deleting(system: System) -> None:
    s = system
    codes = [500] * 5 + [410]
    hook, _ = await create_webhook(s.r, s.token, s.agent.url_for("down", scripted(codes)))
    await s.run(hook, 5)  # auto_disable_after = 5
    posts = await s.sink.agent.wait_for(2, name="alerts")
    first = posts[0].body["alert_id"]
    assert [p.headers["webhook-id"] for p in posts] == [
        f"alert-{first}-raised",
        f"alert-{first}-disabled",
    ]
    assert posts[1].body["type"] == "alert.raised" and posts[1].body["disabled"] is True
    assert posts[1].body["consecutive_failures"] == 5
    assert "disabled" in posts[1].body["text"]
    await open_alert(s, id=first, disabled=True, consecutiveFailures=5)

    # Re-enabling starts the count again, so the alert is resolved.
    _, body = await s.r.graphql(s.token, UPDATE, {"input": {"id": hook, "enabled": True}})
    assert body["data"]["updateCronWebhook"]["cronWebhook"]["enabled"] is True
    posts = await s.sink.agent.wait_for(3, name="alerts")
    assert posts[2].headers["webhook-id"] == f"alert-{first}-resolved"
    assert posts[2].body["disabled"] is False and posts[2].body["consecutive_failures"] == 0

    # 410 Gone disables at once: one alert, raised disabled.
    await s.run(hook)
    posts = await s.sink.agent.wait_for(4, name="alerts")
    second = posts[3].body["alert_id"]
    assert second != first
    assert posts[3].headers["webhook-id"] == f"alert-{second}-disabled"
    assert posts[3].body["consecutive_failures"] == 1 and posts[3].body["disabled"] is True
    await open_alert(s, id=second)

    # Deleting the webhook resolves its open alert, and it is in no list.
    await s.r.graphql(s.token, f"mutation {{ deleteCronWebhook(id: {hook}) {{ id }} }}")
    posts = await s.sink.agent.wait_for(5, name="alerts")
    assert posts[4].headers["webhook-id"] == f"alert-{second}-resolved"
    assert posts[4].body["type"] == "alert.resolved"
    assert await s.alerts() == []
    types = [e["type"] for e in await events_of(s.dsn, f"alert-{second}")]
    assert types == ["alert.raised", "alert.resolved"]
    assert len(s.sink.verified) == 5
    assert await _owed(s.dsn) == 0


async def test_a_failing_sink_is_retried_until_it_answers(system: System) -> None:
    s = system
    s.sink.answers = [503]
    hook, _ = await create_webhook(s.r, s.token, s.agent.url_for("x", scripted([500] * 3)))
    await s.run(hook, 3)
    [refused] = await s.sink.agent.wait_for(1, name="alerts")
    assert await _owed(s.dsn) == 1  # still owed: it comes again after the backoff

    await eventually(lambda: _tried(s.dsn, 1))
    await s.run(hook)  # recovered meanwhile: the resolve waits behind the raise it follows
    await eventually(lambda: _owed_is(s.dsn, 2))
    await asyncio.sleep(0.3)
    assert len(s.sink.posts()) == 1
    s.clock.advance(timedelta(seconds=11))
    posts = await s.sink.agent.wait_for(3, name="alerts")
    assert posts[1].headers["webhook-id"] == refused.headers["webhook-id"]
    assert posts[1].body == refused.body
    assert posts[1].headers["X-Webhook-Attempt"] == "2"
    assert posts[2].headers["webhook-id"] == f"alert-{refused.body['alert_id']}-resolved"
    await eventually(lambda: _owed_is(s.dsn, 0))
    s.clock.advance(timedelta(hours=2))  # answered: never sent again
    await asyncio.sleep(0.3)
    assert len(s.sink.posts()) == 3 and len(s.sink.verified) == 3
    async with ClientSession() as http, http.get(f"{s.r.urls['dispatcher']}/metrics") as resp:
        metrics = await resp.text()
    assert 'cronhooks_dispatcher_alert_posts_total{outcome="failed"}' in metrics
    assert 'cronhooks_dispatcher_alerts_total{stage="raised"}' in metrics
    assert 'cronhooks_dispatcher_alerts_total{stage="resolved"}' in metrics


async def test_without_a_sink_url_alerts_are_events_and_graphql_only(
    quiet_system: System,
) -> None:
    s = quiet_system
    hook, _ = await create_webhook(s.r, s.token, s.agent.url_for("y", scripted([500] * 3)))
    await s.run(hook, 3)
    alert = await open_alert(s, webhookId=hook)
    await s.run(hook)

    async def resolved() -> bool:
        return not await s.alerts(open=True)

    await eventually(resolved)
    types = [e["type"] for e in await events_of(s.dsn, f"alert-{alert['id']}")]
    assert types == ["alert.raised", "alert.resolved"]
    assert s.sink.posts() == [] and await _owed(s.dsn) == 0


async def _owed(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("select count(*) from dispatcher.alert_posts"))
    finally:
        await conn.close()


async def _tried(dsn: str, tries: int) -> bool:
    """The one post owed has been refused `tries` times (and backed off)."""
    conn = await asyncpg.connect(dsn)
    try:
        return bool(await conn.fetchval("select tries = $1 from dispatcher.alert_posts", tries))
    finally:
        await conn.close()


async def _owed_is(dsn: str, count: int) -> bool:
    return await _owed(dsn) == count


async def test_an_owed_post_survives_a_restart(settings: Settings) -> None:
    """The sink is down when the alert is raised and the dispatcher stops; a dispatcher
    started later (another process, as far as it knows) sends what was owed."""
    agent = await Agent().start()
    sink = Sink(agent, generate_secret(), answers=[503])
    agent.url_for("alerts", sink.answer)
    settings = dataclasses.replace(
        settings, alert_webhook_url=sink.url, alert_webhook_secret=sink.secret
    )
    start = near_now()
    async with running(settings, ManualClock(start)) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, agent.url_for("z", scripted([500] * 3)))
        for _ in range(3):
            await finished(r, token, await trigger(r, token, hook))
        await agent.wait_for(1, name="alerts")
        await eventually(lambda: _tried(settings.database_url, 1))  # refused, backed off
    async with running(settings, ManualClock(start + timedelta(seconds=11)), ("dispatcher",)):
        posts = await agent.wait_for(2, name="alerts")
        await eventually(lambda: _owed_is(settings.database_url, 0))
    assert posts[0].headers["webhook-id"] == posts[1].headers["webhook-id"]
    assert posts[1].body["type"] == "alert.raised" and len(sink.verified) == 2
    await agent.stop()
