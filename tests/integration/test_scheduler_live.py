"""Live schedule changes and catch-up after an outage, on the running services
(in-process, real Postgres and RabbitMQ, a controlled clock)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from cronhooks_common.clock import iso
from tests.support.agent import Agent
from tests.support.flows import cron_due
from tests.support.graphql import CREATE_WEBHOOK, UPDATE_WEBHOOK
from tests.support.inprocess import Running, eventually, window_start
from tests.support.system import System

pytestmark = pytest.mark.system(start=window_start)


async def timer_becomes(dsn: str, webhook_id: int, expected: datetime | None) -> None:
    async def check() -> bool:
        return await cron_due(dsn, webhook_id) == expected

    await eventually(check)


async def create(r: Running, token: str, url: str, **fields: object) -> dict:  # type: ignore[type-arg]
    _, body = await r.graphql(
        token, CREATE_WEBHOOK, {"input": {"url": url, "cronSchedule": "*/5 * * * *", **fields}}
    )
    return body["data"]["createCronWebhook"]["cronWebhook"]  # type: ignore[no-any-return]


async def test_update_pause_resume_delete_take_effect_at_once(system: System) -> None:
    dsn = system.dsn
    t0 = system.clock.now()
    hook = await create(system, system.admin, system.agent.url)
    first = t0 + timedelta(minutes=2, seconds=30)
    await timer_becomes(dsn, hook["id"], first)

    # Reschedule: the timer moves without a restart or a tick.
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook["id"], "cronSchedule": "0 * * * *"}}
    )
    top_of_hour = t0.replace(minute=0, second=0) + timedelta(hours=1)
    assert body["data"]["updateCronWebhook"]["cronWebhook"]["nextRunAt"] == iso(top_of_hour)
    await timer_becomes(dsn, hook["id"], top_of_hour)

    # A bad schedule changes nothing.
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook["id"], "cronSchedule": "0 25 * * *"}}
    )
    assert body["errors"][0]["extensions"]["field"] == "cronSchedule"
    assert await cron_due(dsn, hook["id"]) == top_of_hour

    # Pause removes the timer; time passes the slot; nothing fires.
    await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook["id"], "enabled": False}}
    )
    await timer_becomes(dsn, hook["id"], None)
    system.clock.set(top_of_hour + timedelta(minutes=3))
    await asyncio.sleep(0.3)
    assert system.agent.received == []

    # Resume waits for the next slot: no catch-up of the slot missed while paused.
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook["id"], "enabled": True}}
    )
    following = top_of_hour + timedelta(hours=1)
    assert body["data"]["updateCronWebhook"]["cronWebhook"]["nextRunAt"] == iso(following)
    await timer_becomes(dsn, hook["id"], following)
    await asyncio.sleep(0.3)
    assert system.agent.received == []

    # Delete removes it.
    await system.graphql(
        system.admin, f"mutation {{ deleteCronWebhook(id: {hook['id']}) {{ id }} }}"
    )
    await timer_becomes(dsn, hook["id"], None)
    system.clock.set(following + timedelta(seconds=1))
    await asyncio.sleep(0.3)
    assert system.agent.received == []


async def test_catch_up_policies_after_an_outage(system: System) -> None:
    agents = {p: await Agent().start() for p in ("LATEST_ONCE", "SKIP", "ALL")}
    try:
        hooks = {
            p: await create(system, system.admin, a.url, catchUpPolicy=p) for p, a in agents.items()
        }
        first = system.clock.now() + timedelta(minutes=2, seconds=30)
        for hook in hooks.values():
            await timer_becomes(system.dsn, hook["id"], first)
        # Everything was "down" for an hour: the clock jumps past 13 slots, the last one
        # 2 minutes late (beyond the 60 s grace), so all 13 are missed.
        system.clock.set(first + timedelta(hours=1, minutes=2))
        missed = [first + timedelta(minutes=5 * i) for i in range(13)]

        [latest] = await agents["LATEST_ONCE"].wait_for(1)
        assert latest.body["scheduled_for"] == iso(missed[-1])
        assert latest.body["missed_count"] == 12

        all_got = await agents["ALL"].wait_for(13)
        # Requested oldest first (delivery ids follow the slots); they are then dispatched
        # concurrently, so arrival order at the agent is not guaranteed.
        by_id = sorted(all_got, key=lambda g: g.body["id"])
        assert [g.body["scheduled_for"] for g in by_id] == [iso(s) for s in missed]
        assert {g.body["missed_count"] for g in all_got} == {0}

        async def skip_recorded() -> list[dict] | None:  # type: ignore[type-arg]
            _, body = await system.graphql(
                system.admin,
                f"""{{ cronWebhookDeliveries(cronWebhookId:
                {hooks["SKIP"]["id"]}) {{ status scheduledFor error }} }}""",
            )
            rows = body["data"]["cronWebhookDeliveries"]
            return rows or None  # type: ignore[no-any-return]

        [skip] = await eventually(skip_recorded)
        assert skip["status"] == "skipped" and skip["scheduledFor"] == iso(missed[-1])
        assert "13 missed slots" in skip["error"]
        await asyncio.sleep(0.3)
        assert agents["SKIP"].received == []
        assert len(agents["LATEST_ONCE"].received) == 1
        assert len(agents["ALL"].received) == 13
        # Every timer is back on schedule at the next slot after the outage.
        for hook in hooks.values():
            assert await cron_due(system.dsn, hook["id"]) == missed[-1] + timedelta(minutes=5)
    finally:
        for agent in agents.values():
            await agent.stop()
