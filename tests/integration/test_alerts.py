"""Alerts (CONTRACT §12) on the running services: a real agent that fails, then recovers,
and a real alert sink on loopback that verifies every POST with the `standardwebhooks`
library (and trip2g's header). Time is a ManualClock kept near the real clock, so the
signatures' timestamps stay within the verifier's tolerance."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
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
from tests.support.graphql import ALERTS, UPDATE_WEBHOOK
from tests.support.inprocess import admin_token, eventually, running
from tests.support.system import System


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


@pytest.fixture
def sink(agent: Agent) -> Sink:
    """The alert receiver, at /alerts of the test's agent."""
    sink = Sink(agent, generate_secret())
    agent.url_for("alerts", sink.answer)
    return sink


@pytest.fixture
def settings(settings: Settings, sink: Sink) -> Settings:
    """Alerts go to the sink; a webhook is disabled after 5 failures in a row."""
    return dataclasses.replace(
        settings,
        alert_webhook_url=sink.url,
        alert_webhook_secret=sink.secret,
        auto_disable_after=5,
    )


async def alerts(system: System, open: bool | None = None) -> list[dict[str, Any]]:
    _, body = await system.graphql(system.admin, ALERTS, {"open": open})
    assert "errors" not in body, body
    return body["data"]["alerts"]  # type: ignore[no-any-return]


async def run(system: System, webhook_id: int, times: int = 1) -> None:
    """Trigger the webhook `times` times, each delivery to its end."""
    for _ in range(times):
        await finished(system, system.admin, await trigger(system, system.admin, webhook_id))


def scripted(codes: list[int]) -> Callable[[web.Request, Received], Any]:
    """An agent answering these statuses in turn, then 200."""

    async def answer(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=codes.pop(0) if codes else 200, text="down")

    return answer


async def open_alert(system: System, **expected: Any) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        raised = await alerts(system, open=True)
        match = [a for a in raised if all(a[k] == v for k, v in expected.items())]
        return match[0] if match else None

    return await eventually(found)  # type: ignore[no-any-return]


async def test_raised_after_three_failures_and_resolved_by_the_first_success(
    system: System, sink: Sink
) -> None:
    url = system.agent.url_for("flaky", scripted([500, 500, 500]))
    hook, _ = await create_webhook(system, system.admin, url, description="nightly digest")
    await run(system, hook, 2)
    assert await alerts(system, open=True) == [] and sink.posts() == []

    await run(system, hook)  # the third failure in a row
    [raised] = await sink.agent.wait_for(1, name="alerts")
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
    alert = await open_alert(system, webhookId=hook)
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

    await run(system, hook)  # a fourth failure says nothing new
    await run(system, hook)  # the agent answers 200 again: recovered
    posts = await sink.agent.wait_for(2, name="alerts")
    resolved = posts[1].body
    assert posts[1].headers["webhook-id"] == f"alert-{body['alert_id']}-resolved"
    assert resolved["type"] == "alert.resolved" and resolved["consecutive_failures"] == 0
    assert resolved["webhook_id"] == hook and resolved["disabled"] is False
    assert "RESOLVED" in resolved["text"]

    async def closed() -> list[dict[str, Any]]:
        return [a for a in await alerts(system, open=False) if a["id"] == body["alert_id"]]

    [done] = await eventually(closed)
    assert done["resolvedAt"] is not None and done["consecutiveFailures"] == 0
    assert await alerts(system, open=True) == []
    assert [a["id"] for a in await alerts(system)] == [body["alert_id"]]
    assert len(sink.verified) == len(sink.posts()) == 2
    types = [e["type"] for e in await events_of(system.dsn, f"alert-{body['alert_id']}")]
    assert types == ["alert.raised", "alert.resolved"]


async def test_disabling_reenabling_gone_and_deleting(system: System, sink: Sink) -> None:
    codes = [500] * 5 + [410]
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("down", scripted(codes))
    )
    await run(system, hook, 5)  # auto_disable_after = 5
    posts = await sink.agent.wait_for(2, name="alerts")
    first = posts[0].body["alert_id"]
    assert [p.headers["webhook-id"] for p in posts] == [
        f"alert-{first}-raised",
        f"alert-{first}-disabled",
    ]
    assert posts[1].body["type"] == "alert.raised" and posts[1].body["disabled"] is True
    assert posts[1].body["consecutive_failures"] == 5
    assert "disabled" in posts[1].body["text"]
    await open_alert(system, id=first, disabled=True, consecutiveFailures=5)

    # Re-enabling starts the count again, so the alert is resolved.
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook, "enabled": True}}
    )
    assert body["data"]["updateCronWebhook"]["cronWebhook"]["enabled"] is True
    posts = await sink.agent.wait_for(3, name="alerts")
    assert posts[2].headers["webhook-id"] == f"alert-{first}-resolved"
    assert posts[2].body["disabled"] is False and posts[2].body["consecutive_failures"] == 0

    # 410 Gone disables at once: one alert, raised disabled.
    await run(system, hook)
    posts = await sink.agent.wait_for(4, name="alerts")
    second = posts[3].body["alert_id"]
    assert second != first
    assert posts[3].headers["webhook-id"] == f"alert-{second}-disabled"
    assert posts[3].body["consecutive_failures"] == 1 and posts[3].body["disabled"] is True
    await open_alert(system, id=second)

    # Deleting the webhook resolves its open alert, and it is in no list.
    await system.graphql(system.admin, f"mutation {{ deleteCronWebhook(id: {hook}) {{ id }} }}")
    posts = await sink.agent.wait_for(5, name="alerts")
    assert posts[4].headers["webhook-id"] == f"alert-{second}-resolved"
    assert posts[4].body["type"] == "alert.resolved"
    assert await alerts(system) == []
    types = [e["type"] for e in await events_of(system.dsn, f"alert-{second}")]
    assert types == ["alert.raised", "alert.resolved"]
    assert len(sink.verified) == 5
    assert await _owed(system.dsn) == 0


async def test_a_failing_sink_is_retried_until_it_answers(system: System, sink: Sink) -> None:
    sink.answers = [503]
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("x", scripted([500] * 3))
    )
    await run(system, hook, 3)
    [refused] = await sink.agent.wait_for(1, name="alerts")
    assert await _owed(system.dsn) == 1  # still owed: it comes again after the backoff

    await eventually(lambda: _tried(system.dsn, 1))
    await run(system, hook)  # recovered meanwhile: the resolve waits behind the raise it follows
    await eventually(lambda: _owed_is(system.dsn, 2))
    await asyncio.sleep(0.3)
    assert len(sink.posts()) == 1
    system.clock.advance(timedelta(seconds=11))
    posts = await sink.agent.wait_for(3, name="alerts")
    assert posts[1].headers["webhook-id"] == refused.headers["webhook-id"]
    assert posts[1].body == refused.body
    assert posts[1].headers["X-Webhook-Attempt"] == "2"
    assert posts[2].headers["webhook-id"] == f"alert-{refused.body['alert_id']}-resolved"
    await eventually(lambda: _owed_is(system.dsn, 0))
    system.clock.advance(timedelta(hours=2))  # answered: never sent again
    await asyncio.sleep(0.3)
    assert len(sink.posts()) == 3 and len(sink.verified) == 3
    async with ClientSession() as http, http.get(f"{system.urls['dispatcher']}/metrics") as resp:
        metrics = await resp.text()
    assert 'cronhooks_dispatcher_alert_posts_total{outcome="failed"}' in metrics
    assert 'cronhooks_dispatcher_alerts_total{stage="raised"}' in metrics
    assert 'cronhooks_dispatcher_alerts_total{stage="resolved"}' in metrics


@pytest.mark.system(settings={"alert_webhook_url": None, "alert_webhook_secret": None})
async def test_without_a_sink_url_alerts_are_events_and_graphql_only(
    system: System, sink: Sink
) -> None:
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("y", scripted([500] * 3))
    )
    await run(system, hook, 3)
    alert = await open_alert(system, webhookId=hook)
    await run(system, hook)

    async def resolved() -> bool:
        return not await alerts(system, open=True)

    await eventually(resolved)
    types = [e["type"] for e in await events_of(system.dsn, f"alert-{alert['id']}")]
    assert types == ["alert.raised", "alert.resolved"]
    assert sink.posts() == [] and await _owed(system.dsn) == 0


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


async def test_an_owed_post_survives_a_restart(
    settings: Settings, clock: ManualClock, agent: Agent, sink: Sink
) -> None:
    """The sink is down when the alert is raised and the dispatcher stops; a dispatcher
    started later (another process, as far as it knows) sends what was owed."""
    sink.answers = [503]
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, agent.url_for("z", scripted([500] * 3)))
        for _ in range(3):
            await finished(r, token, await trigger(r, token, hook))
        await agent.wait_for(1, name="alerts")
        await eventually(lambda: _tried(settings.database_url, 1))  # refused, backed off
    later = ManualClock(clock.now() + timedelta(seconds=11))
    async with running(settings, later, ("dispatcher",)):
        posts = await agent.wait_for(2, name="alerts")
        await eventually(lambda: _owed_is(settings.database_url, 0))
    assert posts[0].headers["webhook-id"] == posts[1].headers["webhook-id"]
    assert posts[1].body["type"] == "alert.raised" and len(sink.verified) == 2
