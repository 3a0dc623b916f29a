"""While a run is RUNNING its delivery counts as pending for FORBID, DELAY and execution
groups (CONTRACT §16.2, §13); its end hands the lanes on, also when the dispatcher cannot
handle it (§15: a poison run.finished still releases them). On the running services with an
injected clock kept near the real one (slots come when the test moves it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronhooks_dispatcher import health
from tests.support.agent import Agent
from tests.support.flows import (
    create_webhook,
    events_of,
    fetchval,
    finished,
    scheduler_applied,
    trigger,
)
from tests.support.inprocess import eventually
from tests.support.runs import AsyncAgent, report, run_state, start_run
from tests.support.system import System


def minute_start() -> datetime:
    """30 s before a minute boundary of the real clock."""
    return datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(seconds=30)


pytestmark = pytest.mark.system(start=minute_start)


@pytest.fixture
def runner(agent: Agent) -> AsyncAgent:
    return AsyncAgent(agent)


async def types_of(dsn: str, delivery_id: int) -> list[str]:
    return [e["type"] for e in await events_of(dsn, f"delivery-{delivery_id}")]


async def deliveries_of(dsn: str, hook_id: int) -> list[int]:
    """The webhook's deliveries, by id, from the event store."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "select delivery_id from eventstore.events where type = 'delivery.requested'"
            " and (data->>'webhook_id')::bigint = $1 order by delivery_id",
            hook_id,
        )
        return [r["delivery_id"] for r in rows]
    finally:
        await conn.close()


async def test_forbid_skips_a_slot_while_a_run_is_running_and_sends_the_next_after_it(
    system: System, runner: AsyncAgent, agent: Agent
) -> None:
    start = system.clock.now()
    hook_id, delivery_id, token = await start_run(
        system, runner, cronSchedule="* * * * *", concurrencyPolicy="FORBID"
    )
    await scheduler_applied(system.dsn, [hook_id])
    system.clock.set(start + timedelta(seconds=30))  # a slot while the run is RUNNING

    async def skipped() -> int | None:
        ids = [i for i in await deliveries_of(system.dsn, hook_id) if i != delivery_id]
        if ids and (await types_of(system.dsn, ids[0]))[-1] == "delivery.skipped":
            return ids[0]
        return None

    skip = await eventually(skipped)
    event = (await events_of(system.dsn, f"delivery-{skip}"))[-1]
    assert event["type"] == "delivery.skipped" and "concurrency" in event["data"]["reason"]
    assert len(agent.at(runner.name)) == 1
    assert (await report(system, token, {"status": "ok"}))[0] == 200
    await run_state(system.dsn, delivery_id, "SUCCEEDED")

    async def lane_free() -> bool:  # the dispatcher frees it when it reads run.finished
        query = "select count(*) from dispatcher.pending where webhook_id = $1"
        return await fetchval(system.dsn, query, hook_id) == 0

    await eventually(lane_free)  # (the runs row can come first: the importer writes it)
    system.clock.set(start + timedelta(seconds=90))  # the next slot goes
    await agent.wait_for(2, name=runner.name)


async def test_delay_and_group_waiters_go_when_the_run_finishes(
    system: System, runner: AsyncAgent, agent: Agent
) -> None:
    start = system.clock.now()
    hook_id, delivery_id, token = await start_run(
        system,
        runner,
        cronSchedule="* * * * *",
        concurrencyPolicy="DELAY",
        executionGroup="nightly",
    )
    other, _ = await create_webhook(system, system.admin, runner.url, executionGroup="nightly")
    await scheduler_applied(system.dsn, [hook_id, other])
    waiting_in_group = await trigger(system, system.admin, other)
    system.clock.set(start + timedelta(seconds=30))  # a slot of the running webhook: waits

    async def queued() -> list[int] | None:
        mine = [i for i in await deliveries_of(system.dsn, hook_id) if i != delivery_id]
        both = [*mine, waiting_in_group]
        types = [await types_of(system.dsn, i) for i in both]
        return both if len(mine) == 1 and all("delivery.queued" in t for t in types) else None

    [delayed, grouped] = await eventually(queued)
    assert len(agent.at(runner.name)) == 1  # nothing else was sent while it runs
    status, _ = await report(system, token, {"status": "error", "message": "half done"})
    assert status == 200
    # the run's end hands the lanes on: the group's waiters go, one at a time (each 202
    # is a success; the delayed slot's starts a run of its own)
    await agent.wait_for(2, name=runner.name)
    for waiter in (grouped, delayed):
        await finished(system, system.admin, waiter, timeout=15)
        assert "delivery.released" in await types_of(system.dsn, waiter)


class Injected(RuntimeError):
    pass


async def test_a_run_end_the_dispatcher_cannot_handle_still_hands_its_lane_on(
    system: System, runner: AsyncAgent, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = health.Rules.count

    async def broken(self: health.Rules, conn: Any, ended: Any, now: datetime) -> Any:
        if any(h.error == "poison" for h, _ in ended):
            raise Injected("cannot count this run")
        return await count(self, conn, ended, now)

    monkeypatch.setattr(health.Rules, "count", broken)
    _, delivery_id, token = await start_run(system, runner, executionGroup="g")
    other, _ = await create_webhook(system, system.admin, runner.url, executionGroup="g")
    waiting = await trigger(system, system.admin, other)

    async def queued() -> bool:
        return "delivery.queued" in await types_of(system.dsn, waiting)

    await eventually(queued)
    assert (await report(system, token, {"status": "error", "message": "poison"}))[0] == 200
    await run_state(system.dsn, delivery_id, "FAILED")
    await finished(system, system.admin, waiting, timeout=30)
    assert "delivery.released" in await types_of(system.dsn, waiting)
