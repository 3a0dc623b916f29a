"""One webhook end to end, in-process with a controlled clock, on real Postgres/RabbitMQ:
GraphQL create → scheduler timer → slot fires → dispatcher POSTs → delivery succeeds."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from standardwebhooks.webhooks import Webhook

from cronhooks_common.clock import ManualClock
from cronhooks_common.events import EventType
from cronhooks_scheduler.firing import fire_due
from cronhooks_scheduler.loop import SchedulerLoop
from tests.support.flows import cron_due
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.inprocess import eventually, window_start
from tests.support.seeds import scheduler_config
from tests.support.system import System

pytestmark = pytest.mark.system(start=window_start)


async def test_scheduled_slot_reaches_the_agent_signed(system: System) -> None:
    t0 = system.clock.now()
    slot = t0 + timedelta(minutes=2, seconds=30)
    _, body = await system.graphql(
        system.admin,
        CREATE_WEBHOOK,
        {
            "input": {
                "url": system.agent.url,
                "cronSchedule": "*/5 * * * *",
                "instruction": "Write the digest",
            }
        },
    )
    created = body["data"]["createCronWebhook"]
    hook_id = created["cronWebhook"]["id"]
    assert created["cronWebhook"]["nextRunAt"] == slot.isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )
    assert await eventually(lambda: cron_due(system.dsn, hook_id)) == slot

    system.clock.advance(timedelta(seconds=149))
    await asyncio.sleep(0.3)
    assert system.agent.received == []  # one second early: nothing yet
    system.clock.set(slot + timedelta(milliseconds=5))
    [got] = await system.agent.wait_for(1)

    payload = Webhook(created["secret"]).verify(got.raw, got.headers)
    assert payload["trigger"] == "schedule"
    assert payload["scheduled_for"] == slot.isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )
    assert payload["attempt"] == 1 and payload["missed_count"] == 0
    assert payload["webhook_id"] == hook_id
    assert payload["instruction"] == "Write the digest"
    assert payload["timestamp"] == int(got.headers["X-Webhook-Timestamp"])
    assert got.headers["X-Webhook-ID"] == got.headers["webhook-id"] == str(payload["id"])
    assert got.headers["User-Agent"] == "cronhooks/1.0"

    async def delivered() -> dict | None:  # type: ignore[type-arg]
        _, b = await system.graphql(
            system.admin,
            f"""{{ cronWebhookDeliveries(cronWebhookId: {hook_id}) {{
            id status trigger scheduledFor responseStatus attempts {{ attempt responseStatus }} }}
            cronWebhook(id: {hook_id}) {{ nextRunAt lastDeliveryStatus }} }}""",
        )
        d = b["data"]["cronWebhookDeliveries"]
        # Root fields resolve concurrently, each on its own snapshot: wait for both.
        done = d and d[0]["status"] == "success"
        return b["data"] if done and b["data"]["cronWebhook"]["lastDeliveryStatus"] else None

    data = await eventually(delivered)
    [delivery] = data["cronWebhookDeliveries"]
    assert delivery["id"] == payload["id"] and delivery["trigger"] == "SCHEDULE"
    assert delivery["attempts"] == [{"attempt": 1, "responseStatus": 200}]
    next_slot = slot + timedelta(minutes=5)
    assert data["cronWebhook"]["nextRunAt"] == next_slot.isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )
    assert data["cronWebhook"]["lastDeliveryStatus"] == "success"
    assert await cron_due(system.dsn, hook_id) == next_slot


async def test_trigger_fires_now_and_keeps_next_run(system: System) -> None:
    _, body = await system.graphql(
        system.admin,
        CREATE_WEBHOOK,
        {"input": {"url": system.agent.url, "cronSchedule": "0 0 1 1 *"}},
    )
    hook = body["data"]["createCronWebhook"]["cronWebhook"]
    _, body = await system.graphql(
        system.admin, f"mutation {{ triggerCronWebhook(webhookId: {hook['id']}) {{ deliveryId }} }}"
    )
    delivery_id = body["data"]["triggerCronWebhook"]["deliveryId"]
    [got] = await system.agent.wait_for(1)
    assert got.body["id"] == delivery_id
    assert got.body["trigger"] == "manual" and got.body["scheduled_for"] is None
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {hook['id']}) {{ nextRunAt }} }}"
    )
    assert body["data"]["cronWebhook"]["nextRunAt"] == hook["nextRunAt"]


async def _seed_due_timers(pool: asyncpg.Pool, count: int, due: datetime) -> None:
    config = scheduler_config()
    await pool.execute(
        """insert into scheduler.webhooks (webhook_id, stream_version, config)
           select g, 1, $2::jsonb from generate_series(1, $1) g""",
        count,
        config,
    )
    await pool.execute(
        """insert into scheduler.timers (timer_key, kind, subject, due_at)
           select 'cron:' || g, 'cron', g, $2 from generate_series(1, $1) g""",
        count,
        due,
    )


async def test_concurrent_claimers_request_each_slot_once(pool: asyncpg.Pool) -> None:
    due = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
    await _seed_due_timers(pool, 300, due)
    now = due + timedelta(milliseconds=10)

    async def replica() -> int:
        total = 0
        while (claimed := await fire_due(pool, now=now, batch_size=25)) > 0:
            total += claimed
        return total

    claimed = await asyncio.gather(*(replica() for _ in range(3)))
    assert sum(claimed) == 300
    assert await pool.fetchval("select count(*) from scheduler.slot_requests") == 300
    assert (
        await pool.fetchval(
            "select count(distinct (data->>'webhook_id', data->>'scheduled_for'))"
            " from eventstore.events where type = $1",
            EventType.DELIVERY_REQUESTED,
        )
        == 300
    )
    assert await pool.fetchval("select count(*) from eventstore.events") == 300
    assert await pool.fetchval("select min(due_at) from scheduler.timers") == due + timedelta(
        minutes=1
    )
    with pytest.raises(asyncpg.UniqueViolationError):
        await pool.execute("insert into scheduler.slot_requests values (1, $1, 999999)", due)


async def test_loop_wakes_on_a_timer_change_not_on_a_tick(
    pool: asyncpg.Pool, database_url: str
) -> None:
    clock = ManualClock(datetime(2026, 2, 9, 9, 0, tzinfo=UTC))  # never moves in this test
    loop = SchedulerLoop(pool=pool, dsn=database_url, clock=clock)
    task = asyncio.create_task(loop.run())
    try:
        await asyncio.sleep(0.3)  # the loop found nothing and sleeps (no deadline can pass)
        await _seed_due_timers(pool, 1, clock.now())
        await pool.execute("select pg_notify('cronhooks_timers', '')")
        await eventually(lambda: pool.fetchval("select count(*) from eventstore.events"), timeout=5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_herd_is_claimed_in_batches_that_ramp_up(
    pool: asyncpg.Pool, database_url: str
) -> None:
    # A small first claim lets the dispatcher start on a herd while the rest is claimed;
    # each full batch doubles the next up to the cap, and the next herd starts small again.
    due = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
    await _seed_due_timers(pool, 1000, due)
    clock = ManualClock(due + timedelta(milliseconds=10))
    loop = SchedulerLoop(pool=pool, dsn=database_url, clock=clock, batch_size=400)

    async def claims_of_one_step() -> list[int]:
        # Bounded: a step that finds nothing due sleeps on the manual clock for good.
        await asyncio.wait_for(loop._step(), timeout=10)
        rows = await pool.fetch(
            "select count(*) as n from eventstore.events group by txid order by min(position)"
        )
        return [row["n"] for row in rows]

    assert await claims_of_one_step() == [125]
    assert await claims_of_one_step() == [125, 250]
    assert await claims_of_one_step() == [125, 250, 400]
    assert await claims_of_one_step() == [125, 250, 400, 225]
    clock.advance(timedelta(minutes=1))
    assert await claims_of_one_step() == [125, 250, 400, 225, 125]
