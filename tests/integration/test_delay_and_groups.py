"""concurrencyPolicy DELAY and execution groups (CONTRACT §13), on the running services with
an injected clock: slots come when the test moves the clock, the agent answers when the
test lets it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.flows import (
    create_webhook,
    delivery,
    event_count,
    events_of,
    finished,
    scheduler_applied,
    trigger,
)
from tests.support.graphql import CREATE_WEBHOOK, DELIVERIES, UPDATE_WEBHOOK
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.projections import quiet, rebuild, snapshot
from tests.support.system import System


@dataclass
class Gate:
    """An agent route that holds every request until the test lets one go, and notes how
    many were in flight at once."""

    agent: Agent
    name: str = "held"
    status: int = 200
    _open: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(0))
    in_flight: int = 0
    most: int = 0
    done: list[int] = field(default_factory=list)  # delivery ids, in the order answered

    @property
    def url(self) -> str:
        return self.agent.url_for(self.name, self._answer)

    async def _answer(self, _: web.Request, got: Received) -> web.StreamResponse:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self._open.acquire()
        finally:
            self.in_flight -= 1
        self.done.append(got.body["id"])
        return web.Response(status=self.status)

    def let_one_go(self) -> None:
        self._open.release()

    def ids(self) -> list[int]:
        return [r.body["id"] for r in self.agent.at(self.name)]


@pytest.fixture
def gate(agent: Agent) -> Gate:
    return Gate(agent)


def minute_start() -> datetime:
    """30 s before a minute boundary of the real clock (signatures stay verifiable)."""
    return datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(seconds=30)


pytestmark = pytest.mark.system(start=minute_start)


async def history(r: Running, token: str, hook_id: int) -> list[dict[str, Any]]:
    _, body = await r.graphql(token, DELIVERIES, {"id": hook_id})
    return sorted(body["data"]["cronWebhookDeliveries"], key=lambda d: d["id"])


async def rows_with(r: Running, token: str, hook_id: int, count: int, **match: Any) -> list[Any]:
    async def check() -> list[Any] | None:
        rows = [
            d for d in await history(r, token, hook_id) if all(d[k] == v for k, v in match.items())
        ]
        return rows if len(rows) >= count else None

    return await eventually(check)  # type: ignore[no-any-return]


async def types_of(dsn: str, delivery_id: int) -> list[str]:
    return [e["type"] for e in await events_of(dsn, f"delivery-{delivery_id}")]


async def test_delay_waits_for_the_pending_delivery_and_skips_a_second_slot(
    system: System, agent: Agent, gate: Gate
) -> None:
    start = system.clock.now()
    hook_id, _ = await create_webhook(
        system, system.admin, gate.url, cronSchedule="* * * * *", concurrencyPolicy="DELAY"
    )
    manual = await trigger(system, system.admin, hook_id)  # a manual delivery counts as pending
    await agent.wait_for(1, name="held")
    await scheduler_applied(system.dsn, [hook_id])
    system.clock.set(start + timedelta(seconds=30))  # slot 1: waits
    [waiting] = await rows_with(system, system.admin, hook_id, 1, trigger="SCHEDULE", queuedMs=None)
    assert waiting["status"] == "pending"  # queuedMs null: it waits
    system.clock.set(start + timedelta(seconds=90))  # slot 2: one already waits, skipped
    [skipped] = await rows_with(system, system.admin, hook_id, 1, status="skipped")
    assert skipped["error"] == "still_running" and skipped["trigger"] == "SCHEDULE"
    assert skipped["queuedMs"] == 0
    await asyncio.sleep(0.2)
    assert gate.ids() == [manual]  # nothing else was sent meanwhile

    system.clock.advance(timedelta(seconds=5))
    gate.let_one_go()  # the manual delivery finishes: the waiting slot goes at once
    await agent.wait_for(2, name="held")
    assert gate.most == 1
    sent = agent.at("held")[1].body
    assert sent["id"] == waiting["id"] and sent["trigger"] == "schedule"
    assert _parse(sent["scheduled_for"]) == _parse(waiting["scheduledFor"])
    gate.let_one_go()
    done = await finished(system, system.admin, waiting["id"])
    assert done["status"] == "success"
    [row] = [d for d in await history(system, system.admin, hook_id) if d["id"] == waiting["id"]]
    assert row["queuedMs"] == 65_000  # from slot 1 (start + 30 s) to the release
    assert await types_of(system.dsn, waiting["id"]) == [
        "delivery.requested",
        "delivery.queued",
        "delivery.released",
        "delivery.succeeded",
    ]
    skip_events = await events_of(system.dsn, f"delivery-{skipped['id']}")
    assert skip_events[-1]["data"]["reason"] == "still_running"
    assert skip_events[-1]["data"]["policy"] == "DELAY"
    # Nothing pending any more: the next slot is sent when it comes.
    system.clock.set(start + timedelta(seconds=150))
    await agent.wait_for(3, name="held")
    gate.let_one_go()
    assert len(agent.at("held")) == 3


async def test_delay_waits_through_the_retries_of_the_pending_delivery(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    answers = iter([500, 500, 200, 200])
    calls: list[tuple[int, int]] = []

    async def flaky(_: web.Request, got: Received) -> web.StreamResponse:
        calls.append((got.body["id"], got.body["attempt"]))
        return web.Response(status=next(answers))

    hook_id, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("flaky", flaky),
        cronSchedule="* * * * *",
        concurrencyPolicy="DELAY",
        maxRetries=2,
    )
    manual = await trigger(system, system.admin, hook_id)
    await agent.wait_for(1, name="flaky")  # attempt 1 failed: a retry at +10 s
    await scheduler_applied(system.dsn, [hook_id])
    system.clock.set(start + timedelta(seconds=30))  # the slot waits; attempt 2 fails (+60 s)
    [waiting] = await rows_with(system, system.admin, hook_id, 1, trigger="SCHEDULE", queuedMs=None)
    await agent.wait_for(2, name="flaky")
    await asyncio.sleep(0.2)
    assert [c[0] for c in calls] == [manual, manual]
    system.clock.set(start + timedelta(seconds=60))  # attempt 3 succeeds, then the slot goes
    await agent.wait_for(4, name="flaky")
    assert calls == [(manual, 1), (manual, 2), (manual, 3), (waiting["id"], 1)]
    assert (await finished(system, system.admin, waiting["id"]))["status"] == "success"


async def test_a_group_runs_one_at_a_time_in_slot_then_request_order(
    system: System, agent: Agent, gate: Gate
) -> None:
    start = system.clock.now()
    a, _ = await create_webhook(system, system.admin, gate.url, executionGroup="reports")
    b, _ = await create_webhook(
        system, system.admin, gate.url, cronSchedule="* * * * *", executionGroup="reports"
    )
    c, _ = await create_webhook(
        system, system.admin, gate.url, cronSchedule="* * * * *", executionGroup="reports"
    )
    other, _ = await create_webhook(system, system.admin, agent.url_for("free", _ok))
    first = await trigger(system, system.admin, a)  # runs: the group was idle
    await agent.wait_for(1, name="held")
    await scheduler_applied(system.dsn, [a, b, c])
    system.clock.set(start + timedelta(seconds=30))  # slot T1 of b and c: both wait
    t1 = [
        *await rows_with(system, system.admin, b, 1),
        *await rows_with(system, system.admin, c, 1),
    ]
    system.clock.set(start + timedelta(seconds=40))
    manual = await trigger(system, system.admin, a)  # joins at its request time, after T1
    system.clock.set(start + timedelta(seconds=90))  # slot T2 of b and c
    t2 = [
        *await rows_with(
            system, system.admin, b, 1, scheduledFor=_iso(start + timedelta(seconds=90))
        ),
        *await rows_with(
            system, system.admin, c, 1, scheduledFor=_iso(start + timedelta(seconds=90))
        ),
    ]
    # Another webhook, in no group, is not held up.
    await finished(system, system.admin, await trigger(system, system.admin, other))
    await asyncio.sleep(0.2)
    assert gate.ids() == [first]
    expected = [
        first,
        *sorted(d["id"] for d in t1),
        manual,
        *sorted(d["id"] for d in t2),
    ]
    for n in range(2, len(expected) + 1):
        gate.let_one_go()
        await agent.wait_for(n, name="held")
    gate.let_one_go()
    assert gate.ids() == expected and gate.most == 1
    for delivery_id in expected:
        assert (await finished(system, system.admin, delivery_id))["status"] == "success"
    # T1 waited from its slot to the release at T2's time; T2 left at once (same clock).
    waited = {d["id"]: d["queuedMs"] for d in await history(system, system.admin, c)}
    assert sorted(waited.values()) == [0, 60_000]


async def test_forbid_in_a_group_waits_for_the_group_and_skips_its_own_next_slot(
    system: System, agent: Agent, gate: Gate
) -> None:
    start = system.clock.now()
    a, _ = await create_webhook(system, system.admin, gate.url, executionGroup="g1")
    f, _ = await create_webhook(
        system,
        system.admin,
        gate.url,
        cronSchedule="* * * * *",
        concurrencyPolicy="FORBID",
        executionGroup="g1",
    )
    first = await trigger(system, system.admin, a)
    await agent.wait_for(1, name="held")
    await scheduler_applied(system.dsn, [a, f])
    system.clock.set(start + timedelta(seconds=30))
    [waiting] = await rows_with(system, system.admin, f, 1)  # waits for the group
    system.clock.set(start + timedelta(seconds=90))  # f's own delivery is pending: FORBID skips
    [skipped] = await rows_with(system, system.admin, f, 1, status="skipped")
    assert "FORBID" in skipped["error"]
    gate.let_one_go()
    await agent.wait_for(2, name="held")
    gate.let_one_go()
    assert gate.ids() == [first, waiting["id"]]
    assert (await finished(system, system.admin, waiting["id"]))["status"] == "success"


async def test_delay_in_a_group_takes_its_turn_in_slot_order(
    system: System, agent: Agent, gate: Gate
) -> None:
    """A DELAY slot waiting for its webhook joins the group queue when its turn comes."""
    start = system.clock.now()
    d, _ = await create_webhook(
        system,
        system.admin,
        gate.url,
        cronSchedule="* * * * *",
        concurrencyPolicy="DELAY",
        executionGroup="g2",
    )
    manual = await trigger(system, system.admin, d)  # holds d and the group
    await agent.wait_for(1, name="held")
    await scheduler_applied(system.dsn, [d])
    system.clock.set(start + timedelta(seconds=30))
    [slot] = await rows_with(system, system.admin, d, 1, trigger="SCHEDULE")
    gate.let_one_go()
    await agent.wait_for(2, name="held")
    gate.let_one_go()
    assert gate.ids() == [manual, slot["id"]]
    assert (await finished(system, system.admin, slot["id"]))["status"] == "success"


async def test_a_queued_delivery_of_a_deleted_webhook_is_skipped_and_the_group_goes_on(
    system: System, agent: Agent, gate: Gate
) -> None:
    a, _ = await create_webhook(system, system.admin, gate.url, executionGroup="g3")
    doomed, _ = await create_webhook(system, system.admin, gate.url, executionGroup="g3")
    c, _ = await create_webhook(system, system.admin, gate.url, executionGroup="g3")
    first = await trigger(system, system.admin, a)
    await agent.wait_for(1, name="held")
    gone = await trigger(system, system.admin, doomed)
    last = await trigger(system, system.admin, c)
    await eventually(
        lambda: _has(system.dsn, gone, "delivery.queued"),
    )
    await eventually(lambda: _has(system.dsn, last, "delivery.queued"))
    _, body = await system.graphql(
        system.admin, f"mutation {{ deleteCronWebhook(id: {doomed}) {{ id }} }}"
    )
    assert "errors" not in body
    gate.let_one_go()
    await agent.wait_for(2, name="held")
    gate.let_one_go()
    assert gate.ids() == [first, last]
    await eventually(lambda: _has(system.dsn, gone, "delivery.skipped"))
    events = await events_of(system.dsn, f"delivery-{gone}")
    assert events[-1]["data"]["reason"] == "deleted"
    assert (await delivery(system, system.admin, last))["status"] in ("pending", "success")


async def test_groups_are_decided_by_the_database_across_dispatchers(
    settings: Settings, agent: Agent, gate: Gate
) -> None:
    """Two dispatchers (a second one started beside the first on the same database and
    broker) share the queue: the group still runs one delivery at a time."""
    from cronhooks_common.service import Runtime
    from cronhooks_dispatcher.app import bootstrap

    clock = ManualClock(minute_start())
    async with running(settings, clock) as r:
        first = r.services["dispatcher"]
        second = await bootstrap(
            Runtime(
                name="dispatcher",
                settings=settings,
                pool=first._runtime.pool,
                amqp=first._runtime.amqp,
                clock=clock,
            )
        )
        await second.start()
        try:
            token = await admin_token(settings.database_url)
            hooks = [
                (await create_webhook(r, token, gate.url, executionGroup="shared"))[0]
                for _ in range(3)
            ]
            ids = [await trigger(r, token, h) for h in hooks for _ in range(3)]
            await agent.wait_for(1, name="held")
            for n in range(2, len(ids) + 1):
                await asyncio.sleep(0.05)  # room for a wrongly admitted second one
                gate.let_one_go()
                await agent.wait_for(n, name="held")
            gate.let_one_go()
            assert gate.most == 1 and sorted(gate.ids()) == sorted(ids)
            # Those that waited went in request order.
            assert gate.ids()[1:] == sorted(gate.ids()[1:])
            for delivery_id in ids:
                assert (await finished(r, token, delivery_id))["status"] == "success"
        finally:
            await second.stop()


async def _has(dsn: str, delivery_id: int, event_type: str) -> bool:
    return event_type in await types_of(dsn, delivery_id)


async def _ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=200)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


async def test_rebuilt_read_models_keep_groups_and_waits(
    settings: Settings, agent: Agent, gate: Gate, vhost: str
) -> None:
    """The new fields and the wait are projected from events alone: a rebuild equals."""

    start = minute_start()
    clock = ManualClock(start)
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        a, _ = await create_webhook(
            r, token, gate.url, cronSchedule="* * * * *", concurrencyPolicy="DELAY"
        )
        b, _ = await create_webhook(r, token, gate.url, executionGroup="nightly")
        _, body = await r.graphql(
            token,
            """mutation($i: UpdateCronWebhookInput!) { updateCronWebhook(input: $i)
            { cronWebhook { executionGroup concurrencyPolicy } } }""",
            {"i": {"id": a, "executionGroup": "nightly"}},
        )
        assert body["data"]["updateCronWebhook"]["cronWebhook"] == {
            "executionGroup": "nightly",
            "concurrencyPolicy": "DELAY",
        }
        first = await trigger(r, token, b)
        await agent.wait_for(1, name="held")
        await scheduler_applied(settings.database_url, [a, b])
        clock.set(start + timedelta(seconds=30))  # a's slot waits for the group
        await rows_with(r, token, a, 1, queuedMs=None)
        clock.set(start + timedelta(seconds=90))  # a's next slot waits for a (DELAY)
        await rows_with(r, token, a, 2, queuedMs=None)
        clock.set(start + timedelta(seconds=150))  # and the one after is skipped
        await rows_with(r, token, a, 1, status="skipped")
        for n in (2, 3):
            clock.advance(timedelta(seconds=1))
            gate.let_one_go()
            await agent.wait_for(n, name="held")
        gate.let_one_go()
        for row in await history(r, token, a):
            if row["status"] != "skipped":
                await finished(r, token, row["id"])
        await finished(r, token, first)
        await eventually(lambda: lanes_idle(settings.database_url))
        await quiet(settings.database_url, vhost)
        live = await snapshot(settings.database_url)
        waits = sorted(d["queued_ms"] for d in live["admin.deliveries"] if d["queued_ms"])
        assert len(waits) == 2
    await rebuild(settings)
    rebuilt = await snapshot(settings.database_url)
    for table in ("admin.webhooks", "admin.deliveries"):
        assert rebuilt[table] == live[table], table


async def lanes_idle(dsn: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(
            await conn.fetchval(
                """select not exists (select 1 from dispatcher.group_queue)
                   and not exists (select 1 from dispatcher.group_lanes
                                   where running_delivery_id is not null)
                   and not exists (select 1 from dispatcher.pending)"""
            )
        )
    finally:
        await conn.close()


async def test_bad_input_names_the_field_and_changes_nothing(system: System) -> None:
    hook_id, _ = await create_webhook(
        system,
        system.admin,
        "https://agent.example/hook",
        executionGroup="ok",
        concurrencyPolicy="DELAY",
    )
    before = await event_count(system.dsn)
    create, update = CREATE_WEBHOOK, UPDATE_WEBHOOK
    base = {"url": "https://agent.example/hook", "cronSchedule": "* * * * *"}
    cases = [
        (create, {**base, "executionGroup": "no spaces"}, "executionGroup"),
        (create, {**base, "executionGroup": "x" * 101}, "executionGroup"),
        (create, {**base, "executionGroup": None}, "executionGroup"),
        (create, {**base, "concurrencyPolicy": "DELAYED"}, "concurrencyPolicy"),
        (update, {"id": hook_id, "executionGroup": "bad\u00e9"}, "executionGroup"),
        (update, {"id": hook_id, "executionGroup": 7}, "executionGroup"),
        (update, {"id": hook_id, "concurrencyPolicy": "delay"}, "concurrencyPolicy"),
    ]
    for query, values, name in cases:
        _, body = await system.graphql(system.admin, query, {"input": values})
        [error] = body["errors"]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": name}, values
    assert await event_count(system.dsn) == before
    _, body = await system.graphql(
        system.admin,
        f"{{ cronWebhook(id: {hook_id}) {{ executionGroup concurrencyPolicy }} }}",
    )
    assert body["data"]["cronWebhook"] == {"executionGroup": "ok", "concurrencyPolicy": "DELAY"}
    # Defaults, and leaving the group.
    plain, _ = await create_webhook(system, system.admin, "https://agent.example/hook")
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {plain}) {{ executionGroup concurrencyPolicy }} }}"
    )
    assert body["data"]["cronWebhook"] == {"executionGroup": "", "concurrencyPolicy": "ALLOW"}
    _, body = await system.graphql(
        system.admin, update, {"input": {"id": hook_id, "executionGroup": ""}}
    )
    assert "errors" not in body
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {hook_id}) {{ executionGroup }} }}"
    )
    assert body["data"]["cronWebhook"] == {"executionGroup": ""}


async def test_a_delivery_queued_before_its_group_changed_keeps_its_place_and_frees_the_group(
    system: System, agent: Agent, gate: Gate
) -> None:
    a, _ = await create_webhook(system, system.admin, gate.url, executionGroup="g4")
    b, _ = await create_webhook(system, system.admin, gate.url, executionGroup="g4")
    first = await trigger(system, system.admin, a)
    await agent.wait_for(1, name="held")
    queued = await trigger(system, system.admin, b)
    await eventually(lambda: _has(system.dsn, queued, "delivery.queued"))
    _, body = await system.graphql(
        system.admin,
        """mutation($i: UpdateCronWebhookInput!) { updateCronWebhook(input: $i)
        { cronWebhook { executionGroup } } }""",
        {"i": {"id": b, "executionGroup": ""}},
    )
    assert body["data"]["updateCronWebhook"]["cronWebhook"] == {"executionGroup": ""}
    gate.let_one_go()
    await agent.wait_for(2, name="held")  # b's delivery still had its turn in g4
    gate.let_one_go()
    assert (await finished(system, system.admin, queued))["status"] == "success"
    assert await eventually(lambda: lanes_idle(system.dsn))
    later = await trigger(system, system.admin, a)  # g4 is free again
    await agent.wait_for(3, name="held")
    gate.let_one_go()
    assert gate.ids() == [first, queued, later]
