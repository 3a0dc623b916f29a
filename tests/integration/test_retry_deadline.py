"""retryDeadlineSeconds (CONTRACT §17) on the running services, with a real agent on
loopback that keeps failing and the test's clock: checked and kept on both kinds of
webhook, a delivery that fails with `retry deadline passed` while maxRetries would allow
more (its attempts' log still saying what failed), one without a deadline that keeps
retrying, a change delivery whose Retry-After would take it past the deadline, a
scheduled slot whose retries count from its request, and the read models rebuilt equal."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from cronhooks_common.clock import iso
from tests.support.agent import Received
from tests.support.flows import (
    create_change_webhook,
    create_webhook,
    delivery,
    event_count,
    events_of,
    finished,
    push_notes,
    retry_due,
    scheduler_applied,
    trigger,
)
from tests.support.inprocess import eventually, window_start
from tests.support.projections import TABLES, quiet, rebuild, snapshot
from tests.support.system import System

NEVER_HERE = "0 0 29 2 *"
URL = "https://agent.example/hook"
SHOW = "id retryDeadlineSeconds"
CREATE_CRON = f"""mutation($input: CreateCronWebhookInput!) {{ createCronWebhook(input: $input) {{
  cronWebhook {{ {SHOW} }} }} }}"""
CREATE_CHANGE = f"""mutation($input: CreateChangeWebhookInput!) {{
  createChangeWebhook(input: $input) {{ changeWebhook {{ {SHOW} }} }} }}"""
UPDATE_CRON = f"""mutation($input: UpdateCronWebhookInput!) {{ updateCronWebhook(input: $input) {{
  cronWebhook {{ {SHOW} }} }} }}"""
UPDATE_CHANGE = f"""mutation($input: UpdateChangeWebhookInput!) {{
  updateChangeWebhook(input: $input) {{ changeWebhook {{ {SHOW} }} }} }}"""
SHOWN = f"""query($cron: Int!, $change: Int!) {{ cronWebhook(id: $cron) {{ {SHOW} }}
  changeWebhook(id: $change) {{ {SHOW} }} }}"""


async def data(system: System, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    status, body = await system.graphql(system.admin, query, variables)
    assert status == 200 and "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


async def down(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=500, text="down")


async def down_for_two_minutes(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=500, text="busy", headers={"Retry-After": "120"})


# --- the setting ----------------------------------------------------------------------------


@pytest.mark.system(services=("admin-api",))
async def test_it_defaults_to_none_and_is_set_and_updated_on_both_kinds(system: System) -> None:
    cron = (await data(system, CREATE_CRON, {"input": {"url": URL, "cronSchedule": NEVER_HERE}}))[
        "createCronWebhook"
    ]["cronWebhook"]
    assert cron["retryDeadlineSeconds"] == 0
    made = await data(
        system,
        CREATE_CHANGE,
        {"input": {"url": URL, "includePatterns": ["*"], "retryDeadlineSeconds": 3600}},
    )
    change = made["createChangeWebhook"]["changeWebhook"]
    assert change["retryDeadlineSeconds"] == 3600
    await data(system, UPDATE_CRON, {"input": {"id": cron["id"], "retryDeadlineSeconds": 60}})
    await data(system, UPDATE_CHANGE, {"input": {"id": change["id"], "retryDeadlineSeconds": 0}})
    await data(system, UPDATE_CRON, {"input": {"id": cron["id"], "description": "kept"}})
    shown = await data(system, SHOWN, {"cron": cron["id"], "change": change["id"]})
    assert shown["cronWebhook"]["retryDeadlineSeconds"] == 60
    assert shown["changeWebhook"]["retryDeadlineSeconds"] == 0
    events = await events_of(system.dsn, f"webhook-{cron['id']}")
    configs = [e["data"]["config"] for e in events if e["type"].startswith("webhook.")]
    assert [c["retry_deadline_seconds"] for c in configs] == [0, 60, 60]


@pytest.mark.system(services=("admin-api",))
@pytest.mark.parametrize("value", [-1, 1, 59, 604801])
async def test_a_deadline_out_of_range_is_refused_naming_the_field(
    system: System, value: int
) -> None:
    cron = (await data(system, CREATE_CRON, {"input": {"url": URL, "cronSchedule": NEVER_HERE}}))[
        "createCronWebhook"
    ]["cronWebhook"]["id"]
    change = (await data(system, CREATE_CHANGE, {"input": {"url": URL, "includePatterns": ["*"]}}))[
        "createChangeWebhook"
    ]["changeWebhook"]["id"]
    before = await event_count(system.dsn)
    for mutation, fields in (
        (CREATE_CRON, {"url": URL, "cronSchedule": NEVER_HERE, "retryDeadlineSeconds": value}),
        (CREATE_CHANGE, {"url": URL, "includePatterns": ["*"], "retryDeadlineSeconds": value}),
        (UPDATE_CRON, {"id": cron, "retryDeadlineSeconds": value}),
        (UPDATE_CHANGE, {"id": change, "retryDeadlineSeconds": value}),
    ):
        _, body = await system.graphql(system.admin, mutation, {"input": fields})
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", body
        assert error["extensions"]["field"] == "retryDeadlineSeconds", body
        assert "must be 0 (no deadline) or from 60 to 604800" in error["message"], body
    assert await event_count(system.dsn) == before
    shown = await data(system, SHOWN, {"cron": cron, "change": change})
    assert [w["retryDeadlineSeconds"] for w in shown.values()] == [0, 0]


# --- deliveries -----------------------------------------------------------------------------


async def retry_at(system: System, delivery_id: int, when: datetime) -> None:
    """Wait until the delivery's retry timer is due at `when` (its failed attempt before
    that one recorded)."""

    async def there() -> bool:
        return await retry_due(system.dsn, delivery_id) == when

    await eventually(there)


async def test_a_delivery_fails_at_its_deadline_while_one_without_keeps_retrying(
    system: System,
) -> None:
    t0 = system.clock.now()
    url = system.agent.url_for("down", down)
    bounded, _ = await create_webhook(
        system, system.admin, url, maxRetries=10, retryDeadlineSeconds=60
    )
    unbounded, _ = await create_webhook(system, system.admin, url, maxRetries=10)
    ids = [await trigger(system, system.admin, hook) for hook in (bounded, unbounded)]
    # Backoff 10 s, 30 s, 90 s: attempt 2 at t0 + 10 s, 3 at t0 + 40 s, then t0 + 130 s.
    for seconds in (10, 40):
        for delivery_id in ids:
            await retry_at(system, delivery_id, t0 + timedelta(seconds=seconds))
        system.clock.set(t0 + timedelta(seconds=seconds))

    # Attempt 3 failed at t0 + 40 s: its retry (t0 + 130 s) would start past t0 + 60 s.
    ended = await finished(system, system.admin, ids[0])
    assert (ended["status"], ended["attempt"], ended["error"]) == (
        "failed",
        3,
        "retry deadline passed",
    )
    assert ended["nextAttemptAt"] is None
    # each attempt's log says what it failed with
    assert [a["errorMessage"] for a in ended["attempts"]] == ["HTTP 500: down"] * 3
    assert await retry_due(system.dsn, ids[0]) is None

    # Without a deadline the same failures go on being retried, up to maxRetries.
    await retry_at(system, ids[1], t0 + timedelta(seconds=130))
    pending = await delivery(system, system.admin, ids[1])
    assert (pending["status"], pending["attempt"]) == ("pending", 3)
    system.clock.set(t0 + timedelta(seconds=130))
    await retry_at(system, ids[1], t0 + timedelta(seconds=400))  # after attempt 4: 270 s
    assert len(system.agent.at("down")) == 7  # 3 of the bounded, 4 of the other
    events = [e["type"] for e in await events_of(system.dsn, f"delivery-{ids[0]}")]
    assert events[-1] == "delivery.failed" and events.count("delivery.requested") == 3

    # The read models, rebuilt from the event store, are the live ones.
    await quiet(system.dsn, system.vhost)
    live = await snapshot(system.dsn)
    assert (await rebuild(system.settings)).startswith("replayed ")
    rebuilt = await snapshot(system.dsn)
    for table in TABLES:
        assert rebuilt[table] == live[table], table
    assert {w["id"]: w["retry_deadline_seconds"] for w in live["admin.webhooks"]} == {
        bounded: 60,
        unbounded: 0,
    }


async def test_a_change_deliverys_retry_after_past_the_deadline_ends_it(
    system: System,
) -> None:
    hook, _ = await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("busy", down_for_two_minutes),
        includePatterns=["blog/*"],
        maxRetries=5,
        retryDeadlineSeconds=60,
    )
    await push_notes(system, system.admin, ("blog/a.md", "# A"))
    [got] = await system.agent.wait_for(1, name="busy")
    # The agent asks for 2 minutes: the retry would start past the 60 s deadline.
    ended = await finished(system, system.admin, got.body["id"])
    assert (ended["status"], ended["attempt"], ended["error"]) == (
        "failed",
        1,
        "retry deadline passed",
    )
    assert ended["attempts"][0]["errorMessage"] == "HTTP 500: busy"
    assert await retry_due(system.dsn, got.body["id"]) is None
    assert hook


@pytest.mark.system(start=window_start)
async def test_a_slots_deadline_counts_from_its_request(system: System) -> None:
    hook, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("down", down),
        cronSchedule="*/5 * * * *",
        maxRetries=5,
        retryDeadlineSeconds=60,
    )
    await scheduler_applied(system.dsn, [hook])
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook}) {{ nextRunAt }} }}")
    slot = datetime.fromisoformat(body["data"]["cronWebhook"]["nextRunAt"])
    system.clock.set(slot)
    [got] = await system.agent.wait_for(1, name="down")
    delivery_id = got.body["id"]
    assert got.body["trigger"] == "schedule"
    for seconds in (10, 40):
        await retry_at(system, delivery_id, slot + timedelta(seconds=seconds))
        system.clock.set(slot + timedelta(seconds=seconds))
    ended = await finished(system, system.admin, delivery_id)
    assert (ended["status"], ended["attempt"], ended["error"]) == (
        "failed",
        3,
        "retry deadline passed",
    )
    # the retries carried the slot's request time on (none of them moved the deadline)
    events = await events_of(system.dsn, f"delivery-{delivery_id}")
    requests = [e["data"] for e in events if e["type"] == "delivery.requested"]
    assert [r.get("requested_at") for r in requests] == [None, iso(slot), iso(slot)]
