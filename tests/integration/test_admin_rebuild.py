"""Read models: rebuilt from the event store they equal the live ones; stats; secrets."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronhooks_common.clock import iso
from tests.support.agent import Received
from tests.support.flows import create_change_webhook, create_webhook, finished, retry_due, trigger
from tests.support.inprocess import eventually
from tests.support.projections import TABLES, quiet, rebuild, snapshot
from tests.support.system import System

REPORT = {
    "costs": {"tokens": 120, "usd": 0.001, "bad unit": 1},
    "logs": [{"ts": "2026-02-09T09:00:00Z", "level": "info", "msg": "m", "data": {"k": [1]}}],
}


async def test_rebuilt_read_models_equal_the_live_ones(system: System) -> None:
    since = system.clock.now()
    answers = iter([500, 200] + [200] * 50)

    async def mixed(_: web.Request, __: Received) -> web.StreamResponse:
        # CONTRACT §16.1: costs and logs, of a failed answer too, rebuilt as recorded
        return web.json_response(REPORT, status=next(answers))

    async def writer(request: web.Request, __: Received) -> web.StreamResponse:
        body = await request.json()
        return web.json_response(
            {
                "status": "ok",
                "changes": [
                    {"path": f"digests/{body['id']}.md", "content": "x", "expected_hash": ""}
                ],
                **REPORT,
            }
        )

    a, _ = await create_webhook(
        system, system.admin, system.agent.url_for("mixed", mixed), maxRetries=1
    )
    b, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("writer", writer),
        writePatterns=["digests/*"],
        cronSchedule="*/5 * * * *",
        jitterSeconds=30,  # CONTRACT §13: both kept by the rebuild (its manual triggers
        maxDeliveriesPerDay=10,  # count against the budget)
    )
    c, _ = await create_webhook(
        system, system.admin, system.agent.url_for("gone", lambda *_: _gone())
    )
    # A change webhook (CONTRACT §11) fired by the writer's notes (written at depth 1).
    d, _ = await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("changes", _fail),
        includePatterns=["digests/*"],
        maxDepth=2,
        signatureScheme="ED25519",  # CONTRACT §17: its scheme and public key are rebuilt
    )
    await system.graphql(
        system.admin,
        """mutation($id: Int!) { updateChangeWebhook(input: {id: $id, onRemove: false,
        description: "digest watcher"}) { changeWebhook { id } } }""",
        {"id": d},
    )
    await system.graphql(
        system.admin,
        """mutation($id: Int!) { updateCronWebhook(input: {id: $id, description: "renamed",
        cronSchedule: "0 12 * * *", timezone: "Europe/Berlin"}) { cronWebhook { id } } }""",
        {"id": a},
    )
    first = await trigger(system, system.admin, a)
    await eventually(lambda: retry_due(system.dsn, first))
    system.clock.advance(timedelta(seconds=10))
    await finished(system, system.admin, first)
    for _ in range(3):
        await finished(system, system.admin, await trigger(system, system.admin, b))
    for got in await system.agent.wait_for(3, name="changes"):
        await finished(system, system.admin, got.body["id"])
    # Their replays (CONTRACT §12) fail as well; each knows what it replays.
    _, body = await system.graphql(
        system.admin,
        """mutation($id: Int!, $since: DateTime!) { replayDeliveries(webhookId: $id,
        since: $since) { deliveryIds } }""",
        {"id": d, "since": iso(since)},
    )
    replays = body["data"]["replayDeliveries"]["deliveryIds"]
    for replayed in replays:
        await finished(system, system.admin, replayed)
    await finished(
        system, system.admin, await trigger(system, system.admin, c)
    )  # 410: disables c (an open alert)
    codes = iter([500, 500, 500, 200])

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(codes))

    e, _ = await create_webhook(
        system, system.admin, system.agent.url_for("flaky", flaky), signatureScheme="ED25519"
    )
    for _ in range(4):  # an alert raised at the third failure, resolved by the success
        await finished(system, system.admin, await trigger(system, system.admin, e))
    await system.graphql(system.admin, f"mutation {{ deleteCronWebhook(id: {a}) {{ id }} }}")
    await system.graphql(
        system.admin,  # CONTRACT §17: until when the previous secret is honoured, rebuilt
        f"mutation {{ regenerateCronWebhookSecret(id: {b}, graceSeconds: 600) {{ secret }} }}",
    )
    await quiet(system.dsn, system.vhost)

    live = await snapshot(system.dsn)
    assert len(live["admin.webhooks"]) == 5 and len(live["admin.deliveries"]) == 15
    assert sorted(x["id"] for x in live["admin.deliveries"] if x["replay_of"]) == replays
    assert len(replays) == 3
    assert [w["kind"] for w in live["admin.webhooks"]] == ["cron", "cron", "cron", "change", "cron"]
    signing = [(w["signature_scheme"], w["public_key"] is not None) for w in live["admin.webhooks"]]
    assert signing == [("HMAC", False)] * 3 + [("ED25519", True)] * 2
    assert [w["previous_secret_expires_at"] is not None for w in live["admin.webhooks"]] == [
        False,
        True,
        False,
        False,
        False,
    ]
    # c: raised disabled by its 410, open; d: its three change deliveries failed (its agent
    # answers 500), open; e: resolved.
    alerts = sorted(live["admin.alerts"], key=lambda x: x["webhook_id"])
    assert [
        (x["webhook_id"], x["kind"], x["disabled"], x["resolved_at"] is None) for x in alerts
    ] == [
        (c, "cron", True, True),
        (d, "change", False, True),
        (e, "cron", False, False),
    ]
    assert len(live["admin.notes"]) == 3
    # (the snapshot reads jsonb as its text)
    reported = [x for x in live["admin.delivery_attempts"] if x["costs"] != "[]"]
    assert len(reported) == 5  # a's two attempts, b's three
    logged = [json.loads(x["agent_logs"]) for x in live["admin.attempt_logs"]]
    assert sorted(len(x) for x in logged if x) == [2] * 5  # the entry, the bad unit's warning
    retried = next(x for x in live["admin.deliveries"] if x["id"] == first)
    assert (retried["attempt"], retried["trigger"]) == (2, "manual")  # retries are attempts
    assert (await rebuild(system.settings)).startswith("replayed ")
    rebuilt = await snapshot(system.dsn)
    for table in TABLES:
        assert rebuilt[table] == live[table], table


async def _gone() -> web.StreamResponse:
    return web.Response(status=410)


async def _fail(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=500)


async def test_stats_and_consecutive_failures(system: System) -> None:
    codes = iter([200, 500, 200, 500, 500])

    async def scripted(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(codes))

    hook, _ = await create_webhook(system, system.admin, system.agent.url_for("s", scripted))
    for _ in range(5):
        await finished(system, system.admin, await trigger(system, system.admin, hook))
    query = f"""{{ cronWebhook(id: {hook}) {{ consecutiveFailures lastDeliveryStatus
        stats {{ last24h {{ total succeeded failed successRate p50DurationMs p95DurationMs }}
                 last7d {{ total }} }} }} }}"""

    async def settled() -> dict | None:  # type: ignore[type-arg]
        _, body = await system.graphql(system.admin, query)
        hook_data = body["data"]["cronWebhook"]
        # The row and the stats are read on separate snapshots: wait until both are final.
        final = hook_data["stats"]["last24h"]["total"] == 5 and hook_data["lastDeliveryStatus"]
        return hook_data if final and hook_data["consecutiveFailures"] == 2 else None

    data = await eventually(settled)
    day = data["stats"]["last24h"]
    assert (day["total"], day["succeeded"], day["failed"]) == (5, 2, 3)
    assert day["successRate"] == pytest.approx(0.4)
    assert day["p50DurationMs"] is not None and day["p95DurationMs"] >= day["p50DurationMs"]
    assert data["stats"]["last7d"]["total"] == 5
    assert data["consecutiveFailures"] == 2 and data["lastDeliveryStatus"] == "failed"
    system.clock.advance(timedelta(days=2))  # outside the 24 h window, inside the 7 d one
    _, body = await system.graphql(system.admin, query)
    assert body["data"]["cronWebhook"]["stats"]["last24h"]["total"] == 0
    assert body["data"]["cronWebhook"]["stats"]["last24h"]["successRate"] is None
    assert body["data"]["cronWebhook"]["stats"]["last7d"]["total"] == 5


async def test_after_regeneration_only_the_new_secret_verifies(system: System) -> None:
    hook, old = await create_webhook(
        system, system.admin, system.agent.url_for("v", lambda *_: _plain_ok())
    )
    _, body = await system.graphql(
        system.admin, f"mutation {{ regenerateCronWebhookSecret(id: {hook}) {{ secret }} }}"
    )
    new = body["data"]["regenerateCronWebhookSecret"]["secret"]
    await finished(system, system.admin, await trigger(system, system.admin, hook))
    [got] = system.agent.at("v")
    Webhook(new).verify(got.raw, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(got.raw, got.headers)
    # No answer ever shows a secret again.
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {hook}) {{ hasSecret }} cronWebhooks {{ id }} }}"
    )
    assert body["data"]["cronWebhook"] == {"hasSecret": True}
    assert new not in str(body) and old not in str(body)


async def _plain_ok() -> web.StreamResponse:
    return web.Response(status=200)
