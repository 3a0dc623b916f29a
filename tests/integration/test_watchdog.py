"""The scheduler's watchdog (CONTRACT §15): no delivery stays pending longer than its
attempts' timeouts and scheduled retries plus 60 s; it fails as `abandoned` and releases
FORBID, DELAY and its execution group — once, whatever the replicas. Real services
in-process on the real database and broker, time from a ManualClock."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from cronhooks_common import db
from cronhooks_common.clock import ManualClock
from cronhooks_common.events import RequestFields
from cronhooks_common.settings import Settings
from cronhooks_dispatcher import lookup as dispatcher_lookup
from cronhooks_dispatcher import payload
from tests.support import rabbit
from tests.support.agent import Agent
from tests.support.flows import create_webhook, finished, trigger
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.system import System

NO_DISPATCHER = ("admin-api", "importer", "scheduler")


async def stream_types(dsn: str, delivery_id: int) -> list[str]:
    conn = await db.connect(dsn, name="t")
    try:
        rows = await conn.fetch(
            "select type from eventstore.events where stream = $1 order by version",
            f"delivery-{delivery_id}",
        )
        return [r["type"] for r in rows]
    finally:
        await conn.close()


async def watched(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("select count(*) from scheduler.watched"))
    finally:
        await conn.close()


async def status_of(r: Running, token: str, delivery_id: int) -> dict[str, Any]:
    _, body = await r.graphql(
        token,
        "query($id: Int!) { cronWebhookDelivery(id: $id) { status error attempt } }",
        {"id": delivery_id},
    )
    d: dict[str, Any] = body["data"]["cronWebhookDelivery"]
    return d


async def test_a_request_nobody_handles_is_abandoned_after_its_timeout_plus_60_s(
    settings: Settings, clock: ManualClock, agent: Agent
) -> None:
    async with running(settings, clock, names=NO_DISPATCHER) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, agent.url, timeoutSeconds=5)
        delivery_id = await trigger(r, token, hook)
        started = clock.now()
        clock.set(started + timedelta(seconds=64))  # timeout 5 s + 60 s: not yet
        r.services["scheduler"].watchdog.wake()
        await eventually(lambda: _is(watched(settings.database_url), 1))
        assert (await status_of(r, token, delivery_id))["status"] == "pending"
        clock.set(started + timedelta(seconds=65))
        done = await finished(r, token, delivery_id)
        assert (done["status"], done["error"], done["attempt"]) == ("failed", "abandoned", 1)
        assert await stream_types(settings.database_url, delivery_id) == [
            "delivery.requested",
            "delivery.failed",
        ]
        # A dispatcher that comes back later does not send what was abandoned.
        async with running(settings, clock, names=("dispatcher",)):
            other = await trigger(r, token, hook)
            assert (await finished(r, token, other))["status"] == "success"
        assert [x.body["id"] for x in agent.received] == [other]
        assert await watched(settings.database_url) == 0


async def test_a_read_held_back_by_a_running_transaction_is_taken_again_soon(
    settings: Settings, clock: ManualClock, agent: Agent
) -> None:
    """The watchdog reads below the watermark, the server's oldest running transaction: a
    request committed after a transaction still open (here in the same database; it may be
    anyone's on the server) is held back. When that transaction ends, the watchdog reads it
    within moments, not at its next POLL or deadline (the ManualClock here never gets there)."""
    async with running(settings, clock, names=NO_DISPATCHER) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, agent.url, timeoutSeconds=5)
        holder = await asyncpg.connect(settings.database_url)
        try:
            open_transaction = holder.transaction()
            await open_transaction.start()
            await holder.execute("select pg_current_xact_id()")  # older than the request
            await trigger(r, token, hook)
            r.services["scheduler"].watchdog.wake()
            await asyncio.sleep(0.5)  # it read, and found the request held back
            assert await watched(settings.database_url) == 0
            await open_transaction.rollback()
        finally:
            await holder.close()
        await eventually(lambda: _is(watched(settings.database_url), 1))


async def _is(value: Any, expected: int) -> bool:
    return bool(await value == expected)


async def test_a_wedged_delivery_is_abandoned_and_releases_its_group_and_forbid(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The last resort: a delivery whose event fails every time and whose end by fault
    fails too (so its message is dead-lettered) holds its group until the watchdog ends
    it; then the group goes on and the FORBID webhook's next slot is not skipped."""
    build = payload.build_body

    def broken(request: RequestFields, **kw: Any) -> dict[str, Any]:
        if request.target.instruction == "wedge":
            raise RuntimeError("injected")
        return build(request, **kw)

    async def cannot_end(*_: Any) -> bool:
        raise RuntimeError("injected too")

    monkeypatch.setattr(payload, "build_body", broken)
    monkeypatch.setattr(dispatcher_lookup.Receiver, "end_by_fault", cannot_end)
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        wedged, _ = await create_webhook(
            r,
            token,
            agent.url,
            instruction="wedge",
            executionGroup="g",
            concurrencyPolicy="FORBID",
            timeoutSeconds=10,
        )
        behind, _ = await create_webhook(r, token, agent.url, executionGroup="g")
        first = await trigger(r, token, wedged)
        # It took the group's lane and its message went to the dead-letter queue.
        await eventually(lambda: rabbit.dead_letters(settings.amqp_url, "dispatcher"))
        assert await stream_types(settings.database_url, first) == ["delivery.requested"]
        second = await trigger(r, token, behind)
        await eventually(lambda: _queued(settings.database_url, second))  # waits its turn
        clock.advance(timedelta(seconds=71))  # timeout 10 s + 60 s after the request
        done = await finished(r, token, first)
        assert (done["status"], done["error"]) == ("failed", "abandoned")
        assert (await finished(r, token, second))["status"] == "success"
        # The end that released the group (its transaction) also dropped FORBID's pending
        # row and counted the abandonment as a failure for the webhook's health.
        dsn = settings.database_url
        assert await _value(dsn, "select count(*) from dispatcher.pending", wedged) == 0
        failures = "select consecutive_failures from dispatcher.webhook_health"
        assert await _value(dsn, failures, wedged) == 1
        # The webhook works again, and its success resets the count.
        monkeypatch.setattr(payload, "build_body", build)
        third = await trigger(r, token, wedged)
        assert (await finished(r, token, third))["status"] == "success"
        _, body = await r.graphql(
            token,
            "query($id: Int!) { cronWebhook(id: $id) { consecutiveFailures } }",
            {"id": wedged},
        )
        assert body["data"]["cronWebhook"]["consecutiveFailures"] == 0
        assert await _value(dsn, failures, wedged) == 0


async def _value(dsn: str, select: str, webhook_id: int) -> Any:
    """`select` of the dispatcher's row for the webhook (`where webhook_id = $1`)."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(f"{select} where webhook_id = $1", webhook_id)
    finally:
        await conn.close()


async def _queued(dsn: str, delivery_id: int) -> bool:
    return "delivery.queued" in await stream_types(dsn, delivery_id)


async def test_a_retry_whose_timer_was_lost_is_abandoned_after_its_retry_at(
    system: System, agent: Agent
) -> None:
    from aiohttp import web

    async def busy(_: web.Request, __: Any) -> web.StreamResponse:
        return web.Response(status=503)

    hook, _ = await create_webhook(
        system, system.admin, agent.url_for("busy", busy), maxRetries=3, timeoutSeconds=5
    )
    delivery_id = await trigger(system, system.admin, hook)

    async def retry_timer() -> datetime | None:
        conn = await asyncpg.connect(system.dsn)
        try:
            due: datetime | None = await conn.fetchval(
                "delete from scheduler.timers where timer_key = $1 returning due_at",
                f"retry:{delivery_id}",
            )
            return due
        finally:
            await conn.close()

    retry_at = await eventually(retry_timer)  # made, then lost
    assert retry_at == system.clock.now() + timedelta(seconds=10)
    system.clock.set(retry_at + timedelta(seconds=64))
    system.services["scheduler"].watchdog.wake()
    await eventually(lambda: _is(watched(system.dsn), 1))
    assert (await status_of(system, system.admin, delivery_id))["status"] == "pending"
    system.clock.set(retry_at + timedelta(seconds=65))
    done = await finished(system, system.admin, delivery_id)
    assert (done["status"], done["error"], done["attempt"]) == ("failed", "abandoned", 1)


async def test_replicas_abandon_each_delivery_once(
    settings: Settings, clock: ManualClock, agent: Agent
) -> None:
    async with (
        running(settings, clock, names=NO_DISPATCHER) as r,
        running(settings, clock, names=("scheduler",)) as second,
    ):
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, agent.url, timeoutSeconds=1)
        ids = [await trigger(r, token, hook) for _ in range(30)]
        clock.advance(timedelta(seconds=62))
        r.services["scheduler"].watchdog.wake()
        second.services["scheduler"].watchdog.wake()
        for delivery_id in ids:
            assert (await finished(r, token, delivery_id))["error"] == "abandoned"
        for delivery_id in ids:
            assert await stream_types(settings.database_url, delivery_id) == [
                "delivery.requested",
                "delivery.failed",
            ]
