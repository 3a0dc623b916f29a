"""The admin side of agent runs (CONTRACT §16.2) over real HTTP, Postgres and RabbitMQ:
runTimeoutSeconds on both kinds of webhook (checked, kept, carried by the events and the
deliveries' targets), `CronWebhookDelivery.run` and its costs, and replayDeliveries
counting a run that ended FAILED or TIMED_OUT as a failed delivery.

The read-side tests insert the run's `shared.runs` row themselves, for a delivery the real
dispatcher sent: until the run core (the dispatcher starting runs on a 202, the importer's
report endpoints and timeout sweep) lands, no run can be started for real. They test what
admin-api reads from that row, not how the row gets written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_admin.graphql import loaders
from cronhooks_common.clock import iso
from tests.support.agent import Received
from tests.support.flows import (
    create_change_webhook,
    create_webhook,
    event_count,
    events_of,
    finished,
    push_notes,
    trigger,
)
from tests.support.graphql import REPLAY_DELIVERIES
from tests.support.inprocess import eventually, window_start
from tests.support.system import System

T0 = datetime(2026, 2, 9, 9, 2, 30, tzinfo=UTC)
NEVER_HERE = "0 0 29 2 *"

CRON_TIMEOUT = """query($id: Int!) { cronWebhook(id: $id) { runTimeoutSeconds } }"""
CHANGE_TIMEOUT = """query($id: Int!) { changeWebhook(id: $id) { runTimeoutSeconds } }"""
CREATE_CRON = """mutation($input: CreateCronWebhookInput!) { createCronWebhook(input: $input) {
  cronWebhook { id runTimeoutSeconds } } }"""
CREATE_CHANGE = """mutation($input: CreateChangeWebhookInput!) {
  createChangeWebhook(input: $input) { changeWebhook { id runTimeoutSeconds } } }"""
UPDATE_CRON = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
  cronWebhook { id runTimeoutSeconds } } }"""
UPDATE_CHANGE = """mutation($input: UpdateChangeWebhookInput!) {
  updateChangeWebhook(input: $input) { changeWebhook { id runTimeoutSeconds } } }"""
RUN = """query($id: Int!) { cronWebhookDelivery(id: $id) {
  id status costs { unit amount }
  run { state startedAt deadline finishedAt message costs { unit amount }
        logs { ts level msg data } } } }"""
HISTORY_RUNS = """query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id, limit: 50) {
  id run { state } costs { unit amount } } }"""


async def gql(system: System, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    status, body = await system.graphql(system.admin, query, variables)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


async def data(system: System, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body = await gql(system, query, variables)
    assert "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


# --- runTimeoutSeconds ----------------------------------------------------------------------


@pytest.mark.system(services=("admin-api",), start=T0)
async def test_run_timeout_defaults_to_an_hour_and_is_set_and_updated_on_both_kinds(
    system: System,
) -> None:
    url = "https://agent.example/hook"
    made = await data(system, CREATE_CRON, {"input": {"url": url, "cronSchedule": NEVER_HERE}})
    cron = made["createCronWebhook"]["cronWebhook"]
    assert cron["runTimeoutSeconds"] == 3600
    made = await data(
        system,
        CREATE_CHANGE,
        {"input": {"url": url, "includePatterns": ["*"], "runTimeoutSeconds": 60}},
    )
    change = made["createChangeWebhook"]["changeWebhook"]
    assert change["runTimeoutSeconds"] == 60

    updated = await data(
        system, UPDATE_CRON, {"input": {"id": cron["id"], "runTimeoutSeconds": 86400}}
    )
    assert updated["updateCronWebhook"]["cronWebhook"]["runTimeoutSeconds"] == 86400
    updated = await data(
        system, UPDATE_CHANGE, {"input": {"id": change["id"], "runTimeoutSeconds": 900}}
    )
    assert updated["updateChangeWebhook"]["changeWebhook"]["runTimeoutSeconds"] == 900
    # An update of something else keeps it.
    await data(system, UPDATE_CRON, {"input": {"id": cron["id"], "description": "nightly"}})
    shown = await data(system, CRON_TIMEOUT, {"id": cron["id"]})
    assert shown["cronWebhook"]["runTimeoutSeconds"] == 86400
    shown = await data(system, CHANGE_TIMEOUT, {"id": change["id"]})
    assert shown["changeWebhook"]["runTimeoutSeconds"] == 900

    # The webhook's events carry it: what the scheduler and the importer copy, and what
    # the deliveries' targets are built from.
    for hook, values in ((cron["id"], [3600, 86400, 86400]), (change["id"], [60, 900])):
        events = await events_of(system.dsn, f"webhook-{hook}")
        configured = [
            e["data"] for e in events if e["type"] in ("webhook.created", "webhook.updated")
        ]
        assert [c["config"]["run_timeout_seconds"] for c in configured] == values
        assert "run_timeout_seconds" in configured[0]["changed"]


@pytest.mark.system(services=("admin-api",), start=T0)
@pytest.mark.parametrize("value", [59, 86401, 0, -1])
async def test_a_run_timeout_out_of_range_is_refused_naming_the_field_and_changes_nothing(
    system: System, value: int
) -> None:
    url = "https://agent.example/hook"
    cron = (await data(system, CREATE_CRON, {"input": {"url": url, "cronSchedule": NEVER_HERE}}))[
        "createCronWebhook"
    ]["cronWebhook"]["id"]
    change = (await data(system, CREATE_CHANGE, {"input": {"url": url, "includePatterns": ["*"]}}))[
        "createChangeWebhook"
    ]["changeWebhook"]["id"]
    before = await event_count(system.dsn)
    attempts = [
        (CREATE_CRON, {"url": url, "cronSchedule": NEVER_HERE, "runTimeoutSeconds": value}),
        (CREATE_CHANGE, {"url": url, "includePatterns": ["*"], "runTimeoutSeconds": value}),
        (UPDATE_CRON, {"id": cron, "runTimeoutSeconds": value}),
        (UPDATE_CHANGE, {"id": change, "runTimeoutSeconds": value}),
    ]
    for mutation, fields in attempts:
        body = await gql(system, mutation, {"input": fields})
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", body
        assert error["extensions"]["field"] == "runTimeoutSeconds", body
        assert "from 60 to 86400" in error["message"], body
    assert await event_count(system.dsn) == before
    assert (await data(system, CRON_TIMEOUT, {"id": cron}))["cronWebhook"] == {
        "runTimeoutSeconds": 3600
    }
    assert (await data(system, CHANGE_TIMEOUT, {"id": change}))["changeWebhook"] == {
        "runTimeoutSeconds": 3600
    }


# --- the run of a delivery ------------------------------------------------------------------


async def accepted(_: web.Request, __: Received) -> web.StreamResponse:
    """A 202 with what the answer itself cost (an asynchronous agent's first answer)."""
    return web.json_response({"status": "ok", "costs": {"usd": 0.1, "tokens": 40}}, status=202)


async def insert_run(dsn: str, delivery_id: int, webhook_id: int, **row: Any) -> None:
    """The run's row as the run core writes it (shared.runs)."""
    started = row.pop("started_at", datetime(2026, 2, 9, 9, 3, tzinfo=UTC))
    running = row.get("state", "RUNNING") == "RUNNING"
    values = {
        "state": "RUNNING",
        # A RUNNING row's deadline stays ahead of the test's clock: the importer's sweep
        # times out a running run whose deadline has passed (with a run.finished).
        "deadline": (
            datetime.now(UTC) + timedelta(days=1) if running else started + timedelta(hours=1)
        ),
        "finished_at": None,
        "message": None,
        "costs": [],
        "logs": [],
        **row,
    }
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "insert into shared.runs (delivery_id, webhook_id, kind, state, started_at,"
            " deadline, finished_at, message, costs, logs, timeout_seconds, stream_version)"
            " values ($1, $2, 'cron', $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, 3600, 3)",
            delivery_id,
            webhook_id,
            values["state"],
            started,
            values["deadline"],
            values["finished_at"],
            values["message"],
            json.dumps(values["costs"]),
            json.dumps(values["logs"]),
        )
    finally:
        await conn.close()


@pytest.mark.system(start=window_start)
async def test_a_deliverys_run_is_shown_and_its_costs_add_to_the_attempts(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = system.agent.url_for("async", accepted)
    hook, _ = await create_webhook(system, system.admin, url, runTimeoutSeconds=300)
    first = await trigger(system, system.admin, hook)
    assert (await finished(system, system.admin, first))["status"] == "success"
    # The target the delivery was sent with carries the webhook's runTimeoutSeconds.
    [requested, *_] = await events_of(system.dsn, f"delivery-{first}")
    assert requested["data"]["target"]["run_timeout_seconds"] == 300

    # No run: null, and the delivery's costs are its attempt's.
    got = (await data(system, RUN, {"id": first}))["cronWebhookDelivery"]
    assert got["run"] is None
    assert got["costs"] == [{"unit": "tokens", "amount": 40.0}, {"unit": "usd", "amount": 0.1}]

    started = datetime(2026, 2, 9, 9, 3, tzinfo=UTC)
    logs = [
        {
            "ts": "2026-02-09T09:03:05.000Z",
            "level": "info",
            "msg": "<b>reading</b>",
            "data": {"n": [1, 2]},
        },
        {"ts": None, "level": "error", "msg": "gave up", "data": None},
    ]
    await insert_run(
        system.dsn,
        first,
        hook,
        state="FAILED",
        started_at=started,
        finished_at=started + timedelta(minutes=4),
        message="quota exceeded",
        costs=[{"unit": "usd", "amount": 0.2}, {"unit": "eur", "amount": 1.5}],
        logs=logs,
    )
    got = (await data(system, RUN, {"id": first}))["cronWebhookDelivery"]
    assert got["run"] == {
        "state": "FAILED",
        "startedAt": "2026-02-09T09:03:00.000Z",
        "deadline": "2026-02-09T10:03:00.000Z",
        "finishedAt": "2026-02-09T09:07:00.000Z",
        "message": "quota exceeded",
        "costs": [{"unit": "usd", "amount": 0.2}, {"unit": "eur", "amount": 1.5}],
        "logs": [
            {
                "ts": "2026-02-09T09:03:05.000Z",
                "level": "info",
                "msg": "<b>reading</b>",
                "data": {"n": [1, 2]},
            },
            {"ts": None, "level": "error", "msg": "gave up", "data": None},
        ],
    }
    # Summed per unit with the attempt's, units sorted (0.1 + 0.2 is 0.3, not 0.30000000000000004).
    assert got["costs"] == [
        {"unit": "eur", "amount": 1.5},
        {"unit": "tokens", "amount": 40.0},
        {"unit": "usd", "amount": 0.3},
    ]

    # A list of deliveries reads their runs in one query, whatever their number.
    second = await trigger(system, system.admin, hook)
    third = await trigger(system, system.admin, hook)
    for d in (second, third):
        await finished(system, system.admin, d)
    await insert_run(system.dsn, third, hook)  # still running
    batches: list[list[int]] = []
    load = loaders.RunsLoader.batch_load_fn

    async def counted(self: loaders.RunsLoader, keys: list[int]) -> list[Any]:
        batches.append(sorted(keys))
        return await load(self, keys)

    monkeypatch.setattr(loaders.RunsLoader, "batch_load_fn", counted)
    history = (await data(system, HISTORY_RUNS, {"id": hook}))["cronWebhookDeliveries"]
    assert [(d["id"], d["run"]) for d in history] == [
        (third, {"state": "RUNNING"}),
        (second, None),
        (first, {"state": "FAILED"}),
    ]
    assert batches == [sorted([first, second, third])]


# --- replayDeliveries -----------------------------------------------------------------------


@pytest.mark.system(start=window_start)
async def test_replay_counts_a_failed_or_timed_out_run_as_a_failed_delivery(
    system: System,
) -> None:
    url = system.agent.url_for("async", accepted)
    hook, _ = await create_webhook(system, system.admin, url)
    since = system.clock.now()
    made = []
    for state in ("FAILED", "SUCCEEDED", "TIMED_OUT", "RUNNING", None):
        d = await trigger(system, system.admin, hook)
        assert (await finished(system, system.admin, d))["status"] == "success"
        if state is not None:
            ended = None if state == "RUNNING" else system.clock.now()
            await insert_run(system.dsn, d, hook, state=state, finished_at=ended)
        made.append(d)
        system.clock.advance(timedelta(seconds=1))
    body = await gql(
        system, REPLAY_DELIVERIES, {"webhookId": hook, "since": iso(since), "until": None}
    )
    assert "errors" not in body, body
    ids = body["data"]["replayDeliveries"]["deliveryIds"]
    assert len(ids) == 2
    replayed = []
    for new_id in ids:
        [requested, *_] = await events_of(system.dsn, f"delivery-{new_id}")
        replayed.append(requested["data"]["replay_of"])
        await finished(system, system.admin, new_id)
    assert replayed == [made[0], made[2]]  # the FAILED and the TIMED_OUT run, oldest first

    # Once replayed, they are not replayed again.
    body = await gql(
        system, REPLAY_DELIVERIES, {"webhookId": hook, "since": iso(since), "until": None}
    )
    assert body["data"]["replayDeliveries"]["deliveryIds"] == []


@pytest.mark.system(start=window_start)
async def test_a_change_deliverys_target_carries_the_run_timeout(system: System) -> None:
    url = system.agent.url_for("lint", accepted)
    hook, _ = await create_change_webhook(
        system, system.admin, url, includePatterns=["blog/**"], runTimeoutSeconds=120
    )
    await push_notes(system, system.admin, ("blog/a.md", "# a"))
    await system.agent.wait_for(1, name="lint")

    async def requested() -> dict[str, Any] | None:
        conn = await asyncpg.connect(system.dsn)
        try:
            row = await conn.fetchval(
                "select data from eventstore.events where type = 'delivery.requested'"
                " and (data->>'webhook_id')::bigint = $1",
                hook,
            )
        finally:
            await conn.close()
        return None if row is None else json.loads(row)

    got = await eventually(requested)
    assert got["target"]["run_timeout_seconds"] == 120
