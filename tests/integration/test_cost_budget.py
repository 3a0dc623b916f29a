"""costTotals and maxCostPerDay (CONTRACT §16.1, §16.4) on the running services, with an
injected clock: real Postgres and RabbitMQ, the agent a real HTTP server on loopback
answering what it cost."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_common.clock import ManualClock, iso
from cronhooks_common.settings import Settings
from tests.integration.test_retention import with_retention
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, finished, scheduler_applied, trigger
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.projections import quiet, rebuild, snapshot
from tests.support.system import System

NEVER_HERE = "0 0 29 2 *"  # no slot fires while these tests move the clock
MS = timedelta(milliseconds=5)
TOTALS = """query($id: Int!, $days: Int) { cronWebhook(id: $id) {
  maxCostPerDay { unit amount } costTotals(days: $days) { day unit amount } } }"""
HISTORY = """query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id, limit: 100) {
  id status trigger scheduledFor error } }"""
UPDATE = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
  cronWebhook { id maxCostPerDay { unit amount } } } }"""


async def costly(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok", "costs": {"usd": 0.4, "tokens": 100}})


async def totals(r: Running | System, token: str, hook: int, days: int = 7) -> list[Any]:
    _, body = await r.graphql(token, TOTALS, {"id": hook, "days": days})
    assert "errors" not in body, body
    return [(c["day"], c["unit"], c["amount"]) for c in body["data"]["cronWebhook"]["costTotals"]]


async def sent(r: Running | System, token: str, hook: int) -> None:
    """A manual delivery, once it succeeded (its costs are counted in its outcome's
    transaction)."""
    assert (await finished(r, token, await trigger(r, token, hook)))["status"] == "success"


# 21:50 UTC on 2026-06-01 is 23:50 in Berlin: a quarter of an hour on is Berlin's 06-02
# while UTC's day is still 06-01.
@pytest.mark.system(start=datetime(2026, 6, 1, 21, 50, tzinfo=UTC))
async def test_cost_totals_count_each_answer_on_its_day_in_the_webhooks_zone(
    system: System, agent: Agent
) -> None:
    url = agent.url_for("costly", costly)
    hook, _ = await create_webhook(
        system, system.admin, url, cronSchedule=NEVER_HERE, timezone="Europe/Berlin"
    )
    utc_hook, _ = await create_webhook(system, system.admin, url, cronSchedule=NEVER_HERE)
    assert await totals(system, system.admin, hook) == []
    await sent(system, system.admin, hook)
    await sent(system, system.admin, hook)
    await sent(system, system.admin, utc_hook)
    system.clock.advance(timedelta(minutes=15))  # Berlin's 00:05 on 06-02
    for webhook in (hook, hook, hook, utc_hook):
        await sent(system, system.admin, webhook)
    assert await totals(system, system.admin, hook) == [
        ("2026-06-02", "tokens", 300.0),  # newest day first, units sorted
        ("2026-06-02", "usd", 1.2),  # three reports of 0.4 (not 1.2000000000000002)
        ("2026-06-01", "tokens", 200.0),
        ("2026-06-01", "usd", 0.8),
    ]
    assert await totals(system, system.admin, hook, days=1) == [
        ("2026-06-02", "tokens", 300.0),
        ("2026-06-02", "usd", 1.2),
    ]
    # In UTC both reports were on 06-01.
    assert await totals(system, system.admin, utc_hook, days=90) == [
        ("2026-06-01", "tokens", 200.0),
        ("2026-06-01", "usd", 0.8),
    ]
    # An answer without costs, and a zero, add no row.
    answers = iter([{"status": "ok"}, {"status": "ok", "costs": {"usd": 0, "eur": 0.5}}])

    async def thrifty(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response(next(answers))

    other, _ = await create_webhook(
        system, system.admin, agent.url_for("thrifty", thrifty), cronSchedule=NEVER_HERE
    )
    await sent(system, system.admin, other)
    await sent(system, system.admin, other)
    assert await totals(system, system.admin, other) == [("2026-06-01", "eur", 0.5)]


def noon() -> datetime:
    """30 s before a minute boundary at noon UTC today: the slots below stay in one day."""
    return datetime.now(UTC).replace(hour=12, minute=0, second=30, microsecond=0)


async def history(r: Running | System, token: str, hook: int, rows: int) -> list[dict[str, Any]]:
    """The history once it holds `rows` deliveries, none of them pending."""

    async def check() -> list[dict[str, Any]] | None:
        _, body = await r.graphql(token, HISTORY, {"id": hook})
        h = sorted(body["data"]["cronWebhookDeliveries"], key=lambda d: d["id"])
        return h if len(h) >= rows and all(d["status"] != "pending" for d in h) else None

    return await eventually(check, timeout=15)  # type: ignore[no-any-return]


async def limit_applied(dsn: str, hook: int, limits: list[dict[str, Any]]) -> None:
    """Wait until the scheduler's copy holds the limits ("from the next slot" is the next
    slot after that)."""

    async def check() -> bool:
        conn = await asyncpg.connect(dsn)
        try:
            config = await conn.fetchval(
                "select config from scheduler.webhooks where webhook_id = $1", hook
            )
        finally:
            await conn.close()
        return bool(json.loads(config).get("max_cost_per_day") == limits)

    await eventually(check)


@pytest.mark.system(start=noon)
async def test_max_cost_per_day_skips_later_slots_of_the_day_manual_ones_still_go(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    slot = start + timedelta(seconds=30)
    limits = [{"unit": "eur", "amount": 3.0}, {"unit": "usd", "amount": 1.2}]
    hook, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("costly", costly),
        cronSchedule="* * * * *",
        maxCostPerDay=limits,
    )
    _, body = await system.graphql(system.admin, TOTALS, {"id": hook})
    assert body["data"]["cronWebhook"]["maxCostPerDay"] == limits
    await scheduler_applied(system.dsn, [hook])
    for minute in range(3):  # 0.4, 0.8, 1.2 usd: reached after the third answer
        system.clock.set(slot + timedelta(minutes=minute) + MS)
        await history(system, system.admin, hook, minute + 1)
    system.clock.set(slot + timedelta(minutes=3) + MS)
    rows = await history(system, system.admin, hook, 4)
    assert [d["status"] for d in rows] == ["success"] * 3 + ["skipped"]
    assert rows[-1]["error"] == "cost_budget" and rows[-1]["trigger"] == "SCHEDULE"
    assert rows[-1]["scheduledFor"] == iso(slot + timedelta(minutes=3))
    [skip] = await events_of(system.dsn, f"delivery-{rows[-1]['id']}")
    assert skip["type"] == "delivery.skipped"
    data = json.loads(skip["data"]) if isinstance(skip["data"], str) else skip["data"]
    assert data["reason"] == "cost_budget" and data["day"] == start.date().isoformat()
    assert data["cost_limit"] == {"unit": "usd", "amount": 1.2}
    assert len(agent.at("costly")) == 3

    # A manual trigger is still sent (and its costs count); the next slot is skipped.
    await sent(system, system.admin, hook)
    system.clock.set(slot + timedelta(minutes=4) + MS)
    rows = await history(system, system.admin, hook, 6)
    assert [(d["trigger"], d["status"]) for d in rows[-2:]] == [
        ("MANUAL", "success"),
        ("SCHEDULE", "skipped"),
    ]
    today = start.date().isoformat()
    assert await totals(system, system.admin, hook) == [
        (today, "tokens", 400.0),
        (today, "usd", 1.6),
    ]

    # A higher limit applies from the next slot.
    raised = [{"unit": "usd", "amount": 2.0}]
    _, body = await system.graphql(
        system.admin, UPDATE, {"input": {"id": hook, "maxCostPerDay": raised}}
    )
    assert body["data"]["updateCronWebhook"]["cronWebhook"]["maxCostPerDay"] == raised
    await limit_applied(system.dsn, hook, raised)
    system.clock.set(slot + timedelta(minutes=5) + MS)  # 1.6 < 2: sent, then 2.0
    rows = await history(system, system.admin, hook, 7)
    assert rows[-1]["status"] == "success"
    system.clock.set(slot + timedelta(minutes=6) + MS)
    rows = await history(system, system.admin, hook, 8)
    assert (rows[-1]["status"], rows[-1]["error"]) == ("skipped", "cost_budget")

    # The next day's slots go again (a day later: one catch-up delivery for the latest).
    tomorrow = slot + timedelta(days=1)
    system.clock.set(tomorrow + MS)
    rows = await history(system, system.admin, hook, 9)
    assert rows[-1]["status"] == "success" and rows[-1]["scheduledFor"] == iso(tomorrow)
    assert (await totals(system, system.admin, hook))[:2] == [
        (tomorrow.date().isoformat(), "tokens", 100.0),
        (tomorrow.date().isoformat(), "usd", 0.4),
    ]


async def test_bad_limits_and_days_name_the_field(system: System, agent: Agent) -> None:
    for limits in (
        [{"unit": "usd", "amount": 0}],
        [{"unit": "usd", "amount": -1.5}],
        [{"unit": "bad unit", "amount": 1}],
        [{"unit": "", "amount": 1}],
        [{"unit": "u" * 65, "amount": 1}],
        [{"unit": "usd", "amount": 1}, {"unit": "usd", "amount": 2}],
    ):
        _, body = await system.graphql(
            system.admin,
            CREATE_WEBHOOK,
            {"input": {"url": agent.url, "cronSchedule": "* * * * *", "maxCostPerDay": limits}},
        )
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", body
        assert error["extensions"]["field"] == "maxCostPerDay", body
    hook, _ = await create_webhook(system, system.admin, agent.url, cronSchedule=NEVER_HERE)
    _, body = await system.graphql(
        system.admin, UPDATE, {"input": {"id": hook, "maxCostPerDay": [{"unit": "x", "amount": 0}]}}
    )
    assert body["errors"][0]["extensions"]["field"] == "maxCostPerDay", body
    _, body = await system.graphql(system.admin, TOTALS, {"id": hook, "days": 7})
    assert body["data"]["cronWebhook"]["maxCostPerDay"] == []
    for days in (0, 91, -1):
        _, body = await system.graphql(system.admin, TOTALS, {"id": hook, "days": days})
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", body
        assert error["extensions"]["field"] == "days", body
    _, body = await system.graphql(
        system.admin,
        """mutation($url: String!) { createChangeWebhook(input: {url: $url,
        includePatterns: ["*"]}) { changeWebhook { id costTotals(days: 90) { day } } } }""",
        {"url": agent.url},
    )
    assert "errors" not in body, body
    assert body["data"]["createChangeWebhook"]["changeWebhook"]["costTotals"] == []
    change = body["data"]["createChangeWebhook"]["changeWebhook"]["id"]
    _, body = await system.graphql(
        system.admin,
        "query($id: Int!) { changeWebhook(id: $id) { costTotals(days: 91) { day } } }",
        {"id": change},
    )
    assert body["errors"][0]["extensions"]["field"] == "days", body


async def test_totals_outlive_retention_and_a_rebuild_equals_live(
    settings: Settings, vhost: str, agent: Agent
) -> None:
    # Not a fixed hour of today: the event store's first bucket opened at the migration's
    # real time, and the retention job opens the next one only a day after that, so the
    # clock must not start before the real now (at 12:00 the test failed every afternoon).
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    day0 = clock.now().date().isoformat()
    async with running(with_retention(settings, 30), clock) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(
            r, token, agent.url_for("costly", costly), cronSchedule=NEVER_HERE
        )
        old = await trigger(r, token, hook)
        await finished(r, token, old)
        # A day on (the job opens a new bucket), then past the retention.
        clock.advance(timedelta(days=1, minutes=10))
        r.services["scheduler"].retention.poke()
        await eventually(lambda: _buckets_opened(settings.database_url, 2), timeout=15)
        kept = await trigger(r, token, hook)
        await finished(r, token, kept)
        day1 = clock.now().date().isoformat()
        clock.advance(timedelta(days=30, hours=1))
        r.services["scheduler"].retention.poke()

        async def dropped() -> bool:
            conn = await asyncpg.connect(settings.database_url)
            try:
                n = await conn.fetchval("select count(*) from admin.deliveries where id = $1", old)
            finally:
                await conn.close()
            return bool(n == 0)

        await eventually(dropped, timeout=15)
        await sent(r, token, hook)
        today = clock.now().date().isoformat()
        expected = [
            (today, "tokens", 100.0),
            (today, "usd", 0.4),
            (day1, "tokens", 100.0),
            (day1, "usd", 0.4),
            (day0, "tokens", 100.0),  # its delivery is gone; its costs are not
            (day0, "usd", 0.4),
        ]
        assert await totals(r, token, hook, days=90) == expected
        await quiet(settings.database_url, vhost)
        live = await snapshot(settings.database_url)
    await rebuild(settings)
    rebuilt = await snapshot(settings.database_url)
    assert rebuilt == live
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        assert await totals(r, token, hook, days=90) == expected


async def _buckets_opened(dsn: str, n: int) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        opened = await conn.fetchval(
            "select count(*) from eventstore.buckets where opened_at is not null"
        )
    finally:
        await conn.close()
    return bool(opened >= n)
