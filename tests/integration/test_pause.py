"""The pause switch (CONTRACT §16.4) on the running services, with an injected clock: real
Postgres and RabbitMQ, the agent a real HTTP server on loopback. While paused, slots and
change deliveries are skipped as `paused`, manual deliveries answer PAUSED, retries and
agent-cron fires wait for the resume; `until` resumes by itself, once across replicas."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import ClientSession, web

from cronhooks_common.clock import iso
from cronhooks_scheduler.loop import SchedulerLoop
from tests.support.agent import Received
from tests.support.flows import (
    create_change_webhook,
    create_webhook,
    events_of,
    fetchval,
    finished,
    provision_now,
    push_notes,
    retry_due,
    scheduler_applied,
    trigger,
    trigger_ended,
)
from tests.support.graphql import REPLAY_DELIVERIES, TRIGGER_WEBHOOK
from tests.support.inprocess import eventually
from tests.support.projections import quiet, rebuild, snapshot
from tests.support.system import System

MS = timedelta(milliseconds=5)
FIELDS = "paused since until reason"
PAUSE = f"""mutation($until: DateTime, $reason: String!) {{
  pauseDeliveries(until: $until, reason: $reason) {{ {FIELDS} }} }}"""
RESUME = f"mutation {{ resumeDeliveries {{ {FIELDS} }} }}"
STATE = f"{{ deliveryPause {{ {FIELDS} }} }}"
HISTORY = """query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id, limit: 100) {
  id status trigger scheduledFor error } }"""
CHANGE_HISTORY = """query($id: Int!) { changeWebhookDeliveries(changeWebhookId: $id) {
  id status trigger error } }"""
TRIGGER_CHANGE = """mutation($id: Int!, $paths: [String!]!) {
  triggerChangeWebhook(id: $id, paths: $paths) { deliveryId } }"""
NOT_PAUSED = {"paused": False, "since": None, "until": None, "reason": None}


def noon() -> datetime:
    """30 s before a minute boundary at noon UTC today."""
    return datetime.now(UTC).replace(hour=12, minute=0, second=30, microsecond=0)


async def gql(system: System, query: str, variables: dict[str, Any] | None = None) -> Any:
    _, body = await system.graphql(system.admin, query, variables)
    return body


async def pause(system: System, reason: str, until: datetime | None = None) -> dict[str, Any]:
    body = await gql(
        system, PAUSE, {"reason": reason, "until": None if until is None else iso(until)}
    )
    assert "errors" not in body, body
    return body["data"]["pauseDeliveries"]  # type: ignore[no-any-return]


async def resume(system: System) -> dict[str, Any]:
    body = await gql(system, RESUME)
    assert "errors" not in body, body
    return body["data"]["resumeDeliveries"]  # type: ignore[no-any-return]


async def pause_events(dsn: str) -> list[tuple[str, dict[str, Any]]]:
    rows = await events_of(dsn, "deliveries-pause")
    return [
        (r["type"], json.loads(r["data"]) if isinstance(r["data"], str) else r["data"])
        for r in rows
    ]


def code_of(body: dict[str, Any]) -> str:
    [error] = body["errors"]
    return error["extensions"]["code"]  # type: ignore[no-any-return]


async def history(system: System, hook: int, rows: int) -> list[dict[str, Any]]:
    """The history once it holds `rows` deliveries, none of them pending."""

    async def check() -> list[dict[str, Any]] | None:
        body = await gql(system, HISTORY, {"id": hook})
        h = sorted(body["data"]["cronWebhookDeliveries"], key=lambda d: d["id"])
        return h if len(h) >= rows and all(d["status"] != "pending" for d in h) else None

    return await eventually(check, timeout=15)  # type: ignore[no-any-return]


async def test_pause_input_is_checked_pausing_again_replaces_and_resume_is_idempotent(
    system: System,
) -> None:
    now = system.clock.now()
    for variables, field in (
        ({"reason": "outage", "until": iso(now - timedelta(minutes=1))}, "until"),
        ({"reason": "outage", "until": iso(now)}, "until"),  # not in the future
        ({"reason": "   "}, "reason"),
        ({"reason": ""}, "reason"),
        ({"reason": "x" * 1001}, "reason"),
    ):
        body = await gql(system, PAUSE, variables)
        [error] = body["errors"]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": field}, body
    assert (await gql(system, STATE))["data"]["deliveryPause"] == NOT_PAUSED
    assert await pause_events(system.dsn) == []
    # Not paused: resuming changes nothing and appends nothing.
    assert await resume(system) == NOT_PAUSED
    assert await pause_events(system.dsn) == []

    until = now + timedelta(hours=1)
    first = {"paused": True, "since": iso(now), "until": iso(until), "reason": "outage"}
    assert await pause(system, "outage", until) == first
    assert (await gql(system, STATE))["data"]["deliveryPause"] == first
    # Pausing again replaces until and reason; since stays.
    system.clock.advance(timedelta(minutes=5))
    second = {"paused": True, "since": iso(now), "until": None, "reason": "x" * 1000}
    assert await pause(system, "x" * 1000) == second
    assert (await gql(system, STATE))["data"]["deliveryPause"] == second
    assert await resume(system) == NOT_PAUSED
    assert await resume(system) == NOT_PAUSED
    assert (await gql(system, STATE))["data"]["deliveryPause"] == NOT_PAUSED
    events = await pause_events(system.dsn)
    assert [t for t, _ in events] == ["deliveries.paused"] * 2 + ["deliveries.resumed"]
    assert events[0][1] == {
        "since": iso(now),
        "until": iso(until),
        "reason": "outage",
        "by": "admin:1:test",
        "replaced": False,
    }
    assert events[1][1]["replaced"] is True and events[1][1]["until"] is None
    assert events[2][1] == {
        "since": iso(now),
        "resumed_at": iso(now + timedelta(minutes=5)),
        "automatic": False,
        "by": "admin:1:test",
    }


@pytest.mark.system(start=noon)
async def test_while_paused_slots_and_change_deliveries_are_skipped_and_manual_ones_refused(
    system: System,
) -> None:
    slot = system.clock.now() + timedelta(seconds=30)
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("cron", ok), cronSchedule="* * * * *"
    )
    change, _ = await create_change_webhook(
        system, system.admin, system.agent.url_for("change", ok), includePatterns=["blog/*"]
    )
    await scheduler_applied(system.dsn, [hook])
    await pause(system, "provider outage")

    system.clock.set(slot + MS)
    [row] = await history(system, hook, 1)
    assert (row["status"], row["error"], row["trigger"]) == ("skipped", "paused", "SCHEDULE")
    assert row["scheduledFor"] == iso(slot)
    [skip] = await events_of(system.dsn, f"delivery-{row['id']}")
    data = json.loads(skip["data"]) if isinstance(skip["data"], str) else skip["data"]
    assert skip["type"] == "delivery.skipped" and data["reason"] == "paused"
    assert data["skipped_count"] == 1 and "day" not in data

    # An admin's note write is no delivery: it is taken; the change delivery it causes
    # is skipped.
    await push_notes(system, system.admin, ("blog/a.md", "a"))

    async def change_skipped() -> list[dict[str, Any]] | None:
        rows = (await gql(system, CHANGE_HISTORY, {"id": change}))["data"]
        found: list[dict[str, Any]] = rows["changeWebhookDeliveries"]
        return found if found and found[0]["status"] != "pending" else None

    [skipped] = await eventually(change_skipped)
    assert (skipped["status"], skipped["error"], skipped["trigger"]) == (
        "skipped",
        "paused",
        "CHANGE",
    )

    # Manual deliveries answer PAUSED and request nothing.
    events_before = await fetchval(system.dsn, "select count(*) from eventstore.events")
    assert code_of(await gql(system, TRIGGER_WEBHOOK, {"id": hook})) == "PAUSED"
    assert code_of(await gql(system, TRIGGER_CHANGE, {"id": change, "paths": ["blog/a.md"]})) == (
        "PAUSED"
    )
    since = iso(slot - timedelta(days=1))
    replay = await gql(system, REPLAY_DELIVERIES, {"webhookId": hook, "since": since})
    assert code_of(replay) == "PAUSED"
    assert await fetchval(system.dsn, "select count(*) from eventstore.events") == events_before

    # Resumed: the next slot goes, the skipped one is never caught up.
    await resume(system)
    system.clock.set(slot + timedelta(minutes=1) + MS)
    rows = await history(system, hook, 2)
    assert [(d["status"], d["scheduledFor"]) for d in rows] == [
        ("skipped", iso(slot)),
        ("success", iso(slot + timedelta(minutes=1))),
    ]
    assert len(system.agent.at("cron")) == 1 and system.agent.at("change") == []
    manual = await trigger(system, system.admin, hook)  # manual deliveries go again
    assert (await finished(system, system.admin, manual))["status"] == "success"

    # The history's paused skips come out of a rebuild as they are live.
    await quiet(system.dsn, system.vhost)
    live = await snapshot(system.dsn)
    assert (await rebuild(system.settings)).startswith("replayed ")
    assert await snapshot(system.dsn) == live


async def ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


async def test_a_waiting_retry_and_a_due_agent_cron_fire_go_out_at_the_resume(
    system: System,
) -> None:
    answers = iter([500])

    async def fails_once(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response({"status": "ok"}, status=next(answers, 200))

    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("flaky", fails_once), maxRetries=2
    )
    delivery_id = await trigger(system, system.admin, hook)
    retry_at = await eventually(lambda: retry_due(system.dsn, delivery_id))
    await pause(system, "maintenance")

    # Provisioning answers as usual while paused; the fire comes due and is held.
    system.agent.url_for("cb/api/cron/fire", ok)
    callback = f"http://127.0.0.1:{system.agent.port}/cb"
    fire_at = system.clock.now() + timedelta(seconds=5)
    agent_id = await provision_now(system, system.admin, callback, fire_at.isoformat())
    # Long past the retry, the fire and the watchdog's deadline (timeout + 60 s).
    system.clock.set(retry_at + timedelta(minutes=10))
    await asyncio.sleep(0.5)  # what would have gone out by now, had it not been held
    assert len(system.agent.at("flaky")) == 1
    assert system.agent.at("cb/api/cron/fire") == []
    assert await retry_due(system.dsn, delivery_id) == retry_at
    assert (await finished_or_none(system, delivery_id)) is None  # not abandoned

    await resume(system)
    assert (await finished(system, system.admin, delivery_id))["status"] == "success"
    assert len(system.agent.at("flaky")) == 2
    job = await trigger_ended(system, system.admin, agent_id)
    assert job["lastOutcome"] == "delivered"
    assert len(system.agent.at("cb/api/cron/fire")) == 1


async def finished_or_none(system: System, delivery_id: int) -> str | None:
    status: str | None = await fetchval(
        system.dsn,
        "select status from admin.deliveries where id = $1 and status <> 'pending'",
        delivery_id,
    )
    return status


@pytest.mark.system(start=noon)
async def test_until_resumes_by_itself_once_with_three_scheduler_replicas(
    system: System, pool: asyncpg.Pool
) -> None:
    """Two more scheduler loops on the same database: the switch is the row, so every
    replica skips while paused and exactly one appends the automatic resume."""
    replicas = [
        asyncio.create_task(SchedulerLoop(pool=pool, dsn=system.dsn, clock=system.clock).run())
        for _ in range(2)
    ]
    try:
        start = system.clock.now()
        slot = start + timedelta(seconds=30)
        hooks = [
            (
                await create_webhook(
                    system, system.admin, system.agent.url_for("many", ok), cronSchedule="* * * * *"
                )
            )[0]
            for _ in range(5)
        ]
        await scheduler_applied(system.dsn, hooks)
        until = slot + timedelta(seconds=30)
        await pause(system, "window", until)
        system.clock.set(slot + MS)
        for hook in hooks:
            [row] = await history(system, hook, 1)
            assert (row["status"], row["error"]) == ("skipped", "paused")

        system.clock.set(until + MS)

        async def resumed() -> list[tuple[str, dict[str, Any]]] | None:
            events = await pause_events(system.dsn)
            return events if len(events) == 2 else None

        events = await eventually(resumed)
        await asyncio.sleep(0.3)  # a second resume would have come by now
        assert await pause_events(system.dsn) == events
        assert events[1] == (
            "deliveries.resumed",
            {"since": iso(start), "resumed_at": iso(until), "automatic": True, "by": None},
        )
        assert (await gql(system, STATE))["data"]["deliveryPause"] == NOT_PAUSED
        # The next slot goes, once per webhook, whichever replica fires it.
        system.clock.set(slot + timedelta(minutes=1) + MS)
        for hook in hooks:
            rows = await history(system, hook, 2)
            assert [d["status"] for d in rows] == ["skipped", "success"]
        assert len(system.agent.at("many")) == len(hooks)
    finally:
        for task in replicas:
            task.cancel()
        await asyncio.gather(*replicas, return_exceptions=True)


async def down(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=500, text="down")


async def test_a_retry_held_past_its_deadline_ends_its_delivery_at_the_resume(
    system: System,
) -> None:
    # Both fail their first attempt; the resume comes 10 minutes after their retries were
    # due: past one webhook's 60 s deadline, within the other's hour.
    url = system.agent.url_for("down", down)
    bounded, _ = await create_webhook(
        system, system.admin, url, maxRetries=5, retryDeadlineSeconds=60
    )
    roomy, _ = await create_webhook(
        system, system.admin, url, maxRetries=5, retryDeadlineSeconds=3600
    )
    ids = [await trigger(system, system.admin, hook) for hook in (bounded, roomy)]
    due = [await eventually(lambda i=i: retry_due(system.dsn, i)) for i in ids]
    await pause(system, "maintenance")
    system.clock.set(max(due) + timedelta(minutes=10))
    await asyncio.sleep(0.5)  # nothing goes out while paused
    assert len(system.agent.at("down")) == 2

    await resume(system)
    ended = await finished(system, system.admin, ids[0])
    assert (ended["status"], ended["attempt"], ended["error"]) == (
        "failed",
        1,
        "retry deadline passed",
    )
    assert [a["errorMessage"] for a in ended["attempts"]] == ["HTTP 500: down"]
    assert await retry_due(system.dsn, ids[0]) is None
    # it counts for the webhook's health, as the dispatcher's own deadline ends do
    failures = "select consecutive_failures from dispatcher.webhook_health where webhook_id = $1"
    assert await eventually(lambda: fetchval(system.dsn, failures, bounded)) == 1
    # the other's retry goes out at the resume (its third request)
    got = await system.agent.wait_for(3, name="down")
    assert (got[-1].body["id"], got[-1].body["attempt"]) == (ids[1], 2)
    events = [e["type"] for e in await events_of(system.dsn, f"delivery-{ids[0]}")]
    assert events.count("delivery.requested") == 1 and events[-1] == "delivery.failed"
    async with ClientSession() as http, http.get(f"{system.urls['scheduler']}/metrics") as resp:
        metrics = await resp.text()
    assert 'cronhooks_scheduler_retries_total{outcome="deadline_passed"}' in metrics
