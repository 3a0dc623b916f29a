"""jitterSeconds and maxDeliveriesPerDay (CONTRACT §13) on the running services, with an
injected clock: real Postgres and RabbitMQ, the agent a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_common import budget, db
from cronhooks_common.clock import ManualClock, iso
from cronhooks_common.jitter import jitter_offset
from cronhooks_common.settings import Settings
from cronhooks_scheduler.firing import fire_due
from cronhooks_scheduler.loop import SchedulerLoop
from tests.support.agent import Agent, Received
from tests.support.flows import (
    create_webhook,
    cron_due,
    events_of,
    finished,
    scheduler_applied,
    trigger,
)
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.projections import quiet, rebuild, snapshot
from tests.support.system import System

HISTORY = """query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id, limit: 100) {
  id status trigger scheduledFor error attempt } }"""
WEBHOOK = """query($id: Int!) { cronWebhook(id: $id) {
  nextRunAt nextRuns(count: 3) jitterSeconds maxDeliveriesPerDay } }"""
UPDATE = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
  cronWebhook { id jitterSeconds maxDeliveriesPerDay } } }"""
MS = timedelta(milliseconds=5)


def noon() -> datetime:
    """30 s before a minute boundary, at noon UTC of today: the test's minutes never cross a
    day, in UTC or in the zones used here. (Nothing here verifies a signature's age.)"""
    return datetime.now(UTC).replace(hour=12, minute=0, second=30, microsecond=0)


pytestmark = pytest.mark.system(start=noon)


async def counts(dsn: str, webhook_id: int) -> dict[date, int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "select day, requested from shared.daily_deliveries where webhook_id = $1",
            webhook_id,
        )
    finally:
        await conn.close()
    return {r["day"]: r["requested"] for r in rows}


async def history(r: Running, token: str, hook_id: int) -> list[dict[str, Any]]:
    _, body = await r.graphql(token, HISTORY, {"id": hook_id})
    return sorted(body["data"]["cronWebhookDeliveries"], key=lambda d: d["id"])


async def settled_history(r: Running, token: str, hook_id: int, rows: int) -> list[dict[str, Any]]:
    """The history once it holds `rows` deliveries, none of them pending."""

    async def check() -> list[dict[str, Any]] | None:
        h = await history(r, token, hook_id)
        return h if len(h) >= rows and all(d["status"] != "pending" for d in h) else None

    return await eventually(check, timeout=15)  # type: ignore[no-any-return]


async def slot_at(
    r: Running, token: str, clock: ManualClock, hook_id: int, at: datetime, rows: int
) -> list[dict[str, Any]]:
    """Move the clock to `at` and wait until the history holds `rows` settled deliveries."""
    clock.set(at)
    return await settled_history(r, token, hook_id, rows)


async def update(r: Running, token: str, dsn: str, hook_id: int, **fields: Any) -> dict[str, Any]:
    """Update the webhook and wait until the scheduler's copy has the change (it follows the
    events: "from the next slot" is the next slot after that)."""
    _, body = await r.graphql(token, UPDATE, {"input": {"id": hook_id, **fields}})
    assert "errors" not in body, body

    async def applied() -> bool:
        conn = await asyncpg.connect(dsn)
        try:
            config = await conn.fetchval(
                "select config from scheduler.webhooks where webhook_id = $1", hook_id
            )
        finally:
            await conn.close()
        wanted = {
            "jitterSeconds": "jitter_seconds",
            "maxDeliveriesPerDay": "max_deliveries_per_day",
        }
        config = json.loads(config)
        return all(config.get(wanted[k]) == v for k, v in fields.items() if k in wanted)

    await eventually(applied)
    return body["data"]["updateCronWebhook"]["cronWebhook"]  # type: ignore[no-any-return]


async def wait_timer(dsn: str, hook_id: int, due: datetime) -> None:
    async def check() -> bool:
        return await cron_due(dsn, hook_id) == due

    await eventually(check)


# --- jitterSeconds --------------------------------------------------------------------


async def test_jitter_fires_at_slot_plus_offset_with_scheduled_for_the_slot(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    slot = start + timedelta(seconds=30)  # the next minute
    plain, _ = await create_webhook(
        system, system.admin, agent.url_for("plain", _ok), cronSchedule="* * * * *"
    )
    jittered, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("jittered", _ok),
        cronSchedule="* * * * *",
        jitterSeconds=50,
    )
    offset = jitter_offset(jittered, 50)
    assert offset > timedelta(seconds=1)  # so "not yet" below means something
    await wait_timer(system.dsn, plain, slot)
    await wait_timer(system.dsn, jittered, slot + offset)

    # nextRunAt and nextRuns are the slots, as for a webhook without jitter.
    _, a = await system.graphql(system.admin, WEBHOOK, {"id": plain})
    _, b = await system.graphql(system.admin, WEBHOOK, {"id": jittered})
    assert b["data"]["cronWebhook"]["jitterSeconds"] == 50
    for key in ("nextRunAt", "nextRuns"):
        assert b["data"]["cronWebhook"][key] == a["data"]["cronWebhook"][key]
    assert b["data"]["cronWebhook"]["nextRunAt"] == iso(slot)

    system.clock.set(slot + MS)
    await agent.wait_for(1, name="plain")
    system.clock.set(slot + offset - timedelta(milliseconds=500))
    await asyncio.sleep(0.5)
    assert agent.at("jittered") == []  # half a second before its send time
    system.clock.set(slot + offset + MS)
    [got] = await agent.wait_for(1, name="jittered")
    assert got.body["scheduled_for"] == iso(slot) and got.body["trigger"] == "schedule"
    assert got.body["missed_count"] == 0

    # The next slot's timer: the next minute plus the same offset.
    await wait_timer(system.dsn, jittered, slot + timedelta(minutes=1) + offset)
    [row] = await settled_history(system, system.admin, jittered, 1)
    assert row["scheduledFor"] == iso(slot) and row["status"] == "success"
    [requested] = [
        e
        for e in await events_of(system.dsn, f"delivery-{row['id']}")
        if e["type"] == "delivery.requested"
    ]
    assert requested["data"]["scheduled_for"] == iso(slot)
    # The offset it was due at travels along (the dispatcher's fire lag starts there).
    assert requested["data"]["jitter_offset_ms"] == offset // timedelta(milliseconds=1)


async def test_a_slot_is_not_missed_because_of_its_own_offset_and_a_jitter_change_moves_the_timer(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    # SKIP with a grace of 1 s: a slot judged from the slot itself (not slot + offset)
    # would be skipped as missed once its offset is more than a second.
    hook, _ = await create_webhook(
        system,
        system.admin,
        agent.url,
        cronSchedule="0 * * * *",
        jitterSeconds=3600,
        catchUpPolicy="SKIP",
        misfireGraceSeconds=1,
    )
    hour = start.replace(minute=0, second=0) + timedelta(hours=1)
    offset = jitter_offset(hook, 3600)
    assert offset > timedelta(seconds=5)
    await wait_timer(system.dsn, hook, hour + offset)
    system.clock.set(hour + offset + MS)
    [got] = await agent.wait_for(1)
    assert got.body["scheduled_for"] == iso(hour) and got.body["missed_count"] == 0
    next_slot = hour + timedelta(hours=1)
    await wait_timer(system.dsn, hook, next_slot + offset)

    # A change of jitterSeconds moves the pending slot's send time at once; the slot,
    # nextRunAt and nextRuns stay.
    async def projected() -> dict[str, Any] | None:
        _, body = await system.graphql(system.admin, WEBHOOK, {"id": hook})
        return body if body["data"]["cronWebhook"]["nextRunAt"] == iso(next_slot) else None

    before = await eventually(projected)
    assert (await update(system, system.admin, system.dsn, hook, jitterSeconds=600))[
        "jitterSeconds"
    ] == 600
    await wait_timer(system.dsn, hook, next_slot + jitter_offset(hook, 600))
    _, after = await system.graphql(system.admin, WEBHOOK, {"id": hook})
    assert after["data"]["cronWebhook"]["nextRuns"] == before["data"]["cronWebhook"]["nextRuns"]
    assert after["data"]["cronWebhook"]["nextRunAt"] == iso(next_slot)
    await update(system, system.admin, system.dsn, hook, jitterSeconds=0)
    await wait_timer(system.dsn, hook, next_slot)
    history_rows = await settled_history(system, system.admin, hook, 1)
    assert [d["status"] for d in history_rows] == ["success"]


# --- maxDeliveriesPerDay --------------------------------------------------------------


async def test_budget_skips_later_slots_manual_counts_and_retries_do_not(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    answers = iter([500] + [200] * 20)

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(answers))

    hook, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("flaky", flaky),
        cronSchedule="* * * * *",
        maxDeliveriesPerDay=3,
        maxRetries=1,
    )
    today = start.date()
    manual = await trigger(system, system.admin, hook)  # counts: 1; its first attempt fails
    await agent.wait_for(1, name="flaky")
    await scheduler_applied(system.dsn, [hook])
    system.clock.set(start + timedelta(seconds=10) + MS)  # the retry (10 s backoff): not counted
    assert (await finished(system, system.admin, manual))["attempt"] == 2
    assert await counts(system.dsn, hook) == {today: 1}

    slot = start + timedelta(seconds=30)
    await slot_at(system, system.admin, system.clock, hook, slot + MS, 2)  # counts: 2
    await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=1) + MS, 3
    )  # 3: spent
    rows = await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=2) + MS, 4
    )
    assert [(d["trigger"], d["status"]) for d in rows] == [
        ("MANUAL", "success"),
        ("SCHEDULE", "success"),
        ("SCHEDULE", "success"),
        ("SCHEDULE", "skipped"),
    ]
    assert rows[-1]["error"] == "budget"
    assert rows[-1]["scheduledFor"] == iso(slot + timedelta(minutes=2))
    [skip] = await events_of(system.dsn, f"delivery-{rows[-1]['id']}")
    assert skip["type"] == "delivery.skipped"
    assert skip["data"]["reason"] == "budget" and skip["data"]["max_deliveries_per_day"] == 3
    assert skip["data"]["day"] == today.isoformat()

    # A manual trigger is still sent once the budget is spent (CONTRACT §13 skips
    # slots only), and it counts.
    late = await trigger(system, system.admin, hook)
    assert (await finished(system, system.admin, late))["status"] == "success"
    assert await counts(system.dsn, hook) == {today: 4}
    rows = await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=3) + MS, 6
    )
    assert [d["status"] for d in rows[-2:]] == ["success", "skipped"]
    assert len(agent.at("flaky")) == 5  # manual twice (one retry), two slots
    assert await counts(system.dsn, hook) == {today: 4}


async def test_a_limit_change_applies_from_the_next_slot(system: System, agent: Agent) -> None:
    start = system.clock.now()
    slot = start + timedelta(seconds=30)
    hook, _ = await create_webhook(
        system, system.admin, agent.url, cronSchedule="* * * * *", maxDeliveriesPerDay=1
    )
    await scheduler_applied(system.dsn, [hook])
    await slot_at(system, system.admin, system.clock, hook, slot + MS, 1)
    await slot_at(system, system.admin, system.clock, hook, slot + timedelta(minutes=1) + MS, 2)
    assert (await update(system, system.admin, system.dsn, hook, maxDeliveriesPerDay=3))[
        "maxDeliveriesPerDay"
    ] == 3
    await slot_at(system, system.admin, system.clock, hook, slot + timedelta(minutes=2) + MS, 3)
    await update(
        system, system.admin, system.dsn, hook, maxDeliveriesPerDay=2
    )  # two requested already: spent
    await slot_at(system, system.admin, system.clock, hook, slot + timedelta(minutes=3) + MS, 4)
    assert (await update(system, system.admin, system.dsn, hook, maxDeliveriesPerDay=None))[
        "maxDeliveriesPerDay"
    ] is None
    rows = await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=4) + MS, 5
    )
    assert [d["status"] for d in rows] == [
        "success",
        "skipped",
        "success",
        "skipped",
        "success",
    ]
    # Without a limit nothing is counted: the row stays as the limit left it.
    assert await counts(system.dsn, hook) == {start.date(): 2}

    # A limit set again counts the day's requested deliveries (slots 1, 3 and 5; the
    # skipped ones were not requested), then the next slot: 4.
    # A slot fired again (a replay after a crash: its timer put back) is not counted
    # twice: slot_requests knows it, so nothing is appended and nothing counted.
    await update(system, system.admin, system.dsn, hook, maxDeliveriesPerDay=5)
    assert await counts(system.dsn, hook) == {start.date(): 3}
    rows = await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=5) + MS, 6
    )
    assert await counts(system.dsn, hook) == {start.date(): 4}
    pool = await db.create_pool(system.dsn, name="replay")
    try:
        async with pool.acquire() as conn:
            await conn.execute(
                "update scheduler.timers set due_at = $2 where timer_key = $1",
                f"cron:{hook}",
                slot + timedelta(minutes=5),
            )
        await fire_due(pool, now=system.clock.now())
    finally:
        await pool.close()
    assert await counts(system.dsn, hook) == {start.date(): 4}
    assert len(await history(system, system.admin, hook)) == 6


@pytest.mark.system(start=datetime(2026, 6, 1, 21, 49, 30, tzinfo=UTC))
async def test_a_limit_set_mid_day_counts_that_days_deliveries(
    system: System, agent: Agent
) -> None:
    # CONTRACT §13: "once that many deliveries of the webhook were requested in the current
    # day of its zone": those from before the limit was set count too, yesterday's do not.
    start = system.clock.now()
    slot = start + timedelta(seconds=30)  # 23:50 in Berlin; ten minutes on is its midnight
    hook, _ = await create_webhook(
        system, system.admin, agent.url, cronSchedule="* * * * *", timezone="Europe/Berlin"
    )
    await scheduler_applied(system.dsn, [hook])
    await slot_at(
        system, system.admin, system.clock, hook, slot + MS, 1
    )  # Berlin's 06-01: not today's
    for minute in range(10, 13):  # three slots of Berlin's 06-02 (the first a catch-up)
        await slot_at(
            system,
            system.admin,
            system.clock,
            hook,
            slot + timedelta(minutes=minute) + MS,
            minute - 8,
        )
    manual = await trigger(system, system.admin, hook)
    assert (await finished(system, system.admin, manual))["status"] == "success"
    assert await counts(system.dsn, hook) == {}  # no limit: nothing counted

    await update(system, system.admin, system.dsn, hook, maxDeliveriesPerDay=5)
    assert await counts(system.dsn, hook) == {date(2026, 6, 2): 4}
    rows = await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=13) + MS, 6
    )
    rows = await slot_at(
        system, system.admin, system.clock, hook, slot + timedelta(minutes=14) + MS, 7
    )
    assert [d["status"] for d in rows[-2:]] == ["success", "skipped"]
    assert rows[-1]["error"] == "budget"
    # Setting another limit keeps counting from the row: no second seed.
    await update(system, system.admin, system.dsn, hook, maxDeliveriesPerDay=9)
    assert await counts(system.dsn, hook) == {date(2026, 6, 2): 5}


@pytest.mark.system(start=datetime(2026, 3, 28, 22, 30, tzinfo=UTC))
async def test_the_day_is_the_webhooks_calendar_day_also_on_a_dst_day(
    system: System, agent: Agent
) -> None:
    # Berlin's 2026-03-29 has 23 hours: its slots at 00, 06, 12 and 18 local time are
    # 23:00 (the day before, in UTC), 04:00, 10:00 and 16:00 UTC, and the next local
    # midnight is 22:00 UTC — still 03-29 in UTC, already 03-30 in Berlin.
    hook, _ = await create_webhook(
        system,
        system.admin,
        agent.url,
        cronSchedule="0 */6 * * *",
        timezone="Europe/Berlin",
        maxDeliveriesPerDay=2,
    )
    await scheduler_applied(system.dsn, [hook])
    slots = [
        datetime(2026, 3, 28, 23, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 4, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 10, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 16, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 22, 0, tzinfo=UTC),
    ]
    for n, at in enumerate(slots, 1):
        rows = await slot_at(system, system.admin, system.clock, hook, at + MS, n)
    assert [(d["scheduledFor"], d["status"]) for d in rows] == [
        (iso(slots[0]), "success"),
        (iso(slots[1]), "success"),
        (iso(slots[2]), "skipped"),
        (iso(slots[3]), "skipped"),
        (iso(slots[4]), "success"),  # a new day in Berlin
    ]
    assert await counts(system.dsn, hook) == {
        date(2026, 3, 29): 2,
        date(2026, 3, 30): 1,
    }


async def test_two_scheduler_replicas_and_manual_triggers_do_not_exceed_the_budget(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    slot = start + timedelta(seconds=30)
    hooks = [
        (
            await create_webhook(
                system, system.admin, agent.url, cronSchedule="* * * * *", maxDeliveriesPerDay=2
            )
        )[0]
        for _ in range(12)
    ]
    for hook in hooks:
        await wait_timer(system.dsn, hook, slot)
    second_pool = await db.create_pool(system.dsn, name="replica")
    replica = SchedulerLoop(pool=second_pool, dsn=system.dsn, clock=system.clock)
    task = asyncio.create_task(replica.run())
    try:
        # Manual triggers race the replicas' slot claims on the same counter rows.
        for minute in range(3):
            system.clock.set(slot + timedelta(minutes=minute) + MS)
            replica.wake()
            await asyncio.gather(*(trigger(system, system.admin, h) for h in hooks[:4]))
            await eventually(lambda n=minute + 1: _all_decided(system.dsn, hooks, n), timeout=20)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await second_pool.close()
    conn = await asyncpg.connect(system.dsn)
    try:
        rows = await conn.fetch(
            """
            select (e.data->>'webhook_id')::bigint as hook, e.type, e.data->>'trigger' as trigger
            from eventstore.events e where e.stream like 'delivery-%' and e.version = 1
            """
        )
    finally:
        await conn.close()
    for hook in hooks:
        mine = [x for x in rows if x["hook"] == hook]
        sent = [x for x in mine if x["type"] == "delivery.requested"]
        schedule_sent = [x for x in sent if x["trigger"] == "schedule"]
        skipped = [x for x in mine if x["type"] == "delivery.skipped"]
        assert len(schedule_sent) + len(skipped) == 3  # each slot once, by one replica
        if hook in hooks[:4]:  # 3 manual: the budget is spent by them alone at most
            assert len(sent) - len(schedule_sent) == 3
            # Slot 0 raced one manual request (count 0 or 1 before it): admitted; the
            # later slots found the budget spent.
            assert len(schedule_sent) == 1
        else:
            assert len(schedule_sent) == 2
        counted = await counts(system.dsn, hook)
        assert counted == {start.date(): len(sent)}


async def _all_decided(dsn: str, hooks: list[int], slots: int) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        n = await conn.fetchval(
            "select count(*) from scheduler.slot_requests where webhook_id = any($1::bigint[])",
            hooks,
        )
    finally:
        await conn.close()
    return bool(n == len(hooks) * slots)


async def test_concurrent_writers_admit_no_more_than_the_limit(database_url: str) -> None:
    """The counter itself: eight transactions racing for one (webhook, day) of limit 5."""
    pool = await asyncpg.create_pool(database_url, min_size=8, max_size=8)
    key = (7, date(2026, 12, 2))

    async def one() -> int:
        async with pool.acquire() as conn, conn.transaction():
            verdicts = await budget.admit(conn, [(key, 5)] * 3)
            await asyncio.sleep(0.01)  # hold the row lock a little
            return sum(verdicts)

    try:
        admitted = await asyncio.gather(*(one() for _ in range(8)))
        assert sum(admitted) == 5
        assert (
            await pool.fetchval(
                "select requested from shared.daily_deliveries where webhook_id = 7"
            )
            == 5
        )
    finally:
        await pool.close()


# --- GraphQL, change webhooks, rebuild -------------------------------------------------


async def test_bad_values_name_the_field_and_change_webhooks_have_neither(
    system: System, agent: Agent
) -> None:
    for fields, field in (
        ({"jitterSeconds": 3601}, "jitterSeconds"),
        ({"jitterSeconds": -1}, "jitterSeconds"),
        ({"maxDeliveriesPerDay": 0}, "maxDeliveriesPerDay"),
        ({"maxDeliveriesPerDay": "ten"}, "maxDeliveriesPerDay"),
    ):
        _, body = await system.graphql(
            system.admin,
            CREATE_WEBHOOK,
            {"input": {"url": agent.url, "cronSchedule": "* * * * *", **fields}},
        )
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", body
        assert error["extensions"]["field"] == field, body
    hook, _ = await create_webhook(system, system.admin, agent.url)
    _, body = await system.graphql(system.admin, WEBHOOK, {"id": hook})
    assert body["data"]["cronWebhook"]["jitterSeconds"] == 0
    assert body["data"]["cronWebhook"]["maxDeliveriesPerDay"] is None
    _, body = await system.graphql(
        system.admin, UPDATE, {"input": {"id": hook, "maxDeliveriesPerDay": -2}}
    )
    assert body["errors"][0]["extensions"]["field"] == "maxDeliveriesPerDay"
    # CONTRACT §13 adds both to the cron webhook inputs only.
    _, body = await system.graphql(
        system.admin,
        """mutation($url: String!) { createChangeWebhook(input: {url: $url,
        includePatterns: ["*"], jitterSeconds: 5}) { changeWebhook { id } } }""",
        {"url": agent.url},
    )
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_rebuilt_read_models_keep_jitter_budget_and_budget_skips(
    settings: Settings, agent: Agent, vhost: str
) -> None:
    start = noon()
    clock = ManualClock(start)
    slot = start + timedelta(seconds=30)
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(
            r, token, agent.url, cronSchedule="* * * * *", maxDeliveriesPerDay=1, jitterSeconds=2
        )
        other, _ = await create_webhook(r, token, agent.url, jitterSeconds=90)
        offset = jitter_offset(hook, 2)
        await scheduler_applied(settings.database_url, [hook, other])
        await slot_at(r, token, clock, hook, slot + offset + MS, 1)
        await slot_at(r, token, clock, hook, slot + timedelta(minutes=1) + offset + MS, 2)
        await update(r, token, settings.database_url, other, jitterSeconds=0, maxDeliveriesPerDay=7)
        await quiet(settings.database_url, vhost)
        live = await snapshot(settings.database_url)
        webhooks = {w["id"]: w for w in live["admin.webhooks"]}
        assert (webhooks[hook]["jitter_seconds"], webhooks[hook]["max_deliveries_per_day"]) == (
            2,
            1,
        )
        assert (webhooks[other]["jitter_seconds"], webhooks[other]["max_deliveries_per_day"]) == (
            0,
            7,
        )
        assert [d["error"] for d in live["admin.deliveries"]][-1] == "budget"
        await rebuild(settings)
        rebuilt = await snapshot(settings.database_url)
        for table in ("admin.webhooks", "admin.deliveries"):
            assert rebuilt[table] == live[table], table


async def _ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=200)
