"""An event the services cannot handle however often they try (a bug of ours, injected
here) never leaves what it started pending behind a dead letter (CONTRACT §15): the
delivery fails with `internal error: …` and releases its execution group, a fire ends
`failed`, an import is rejected so its attempt ends. Real services in-process on the
real database and broker; the fault is injected into our own code, nothing is mocked."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import asyncpg
from aiohttp import web

from cronhooks_common.clock import ManualClock
from cronhooks_common.events import RequestFields
from cronhooks_common.settings import Settings
from cronhooks_dispatcher import deliver as dispatcher_deliver
from cronhooks_dispatcher import fire as dispatcher_fire
from cronhooks_dispatcher import payload
from cronhooks_importer import imports
from cronhooks_scheduler import retries as scheduler_retries
from cronhooks_scheduler import triggers as scheduler_triggers
from tests.support import rabbit
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, finished, provision_now, trigger, trigger_ended
from tests.support.inprocess import admin_token, eventually, running

POISON = "poison"  # the instruction that makes the injected fault fire


class Injected(RuntimeError):
    pass


async def dead_letters(settings: Settings, consumer: str) -> int:
    return await rabbit.dead_letters(settings.amqp_url, consumer)


async def test_two_dispatchers_end_a_poison_delivery_and_its_group_goes_on(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    build = payload.build_body

    def broken(request: RequestFields, **kw: Any) -> dict[str, Any]:
        if request.target.instruction == POISON:
            raise Injected("cannot build this body")
        return build(request, **kw)

    monkeypatch.setattr(payload, "build_body", broken)
    hold = asyncio.Event()

    async def held(_: web.Request, __: Received) -> web.StreamResponse:
        await hold.wait()  # "first" holds the group while the others line up behind it
        return web.json_response({"status": "ok"})

    async with running(settings, clock) as r, running(settings, clock, names=("dispatcher",)):
        token = await admin_token(settings.database_url)
        hooks = [
            (
                await create_webhook(
                    r,
                    token,
                    agent.url_for("first", held) if i == "first" else agent.url,
                    instruction=i,
                    executionGroup="g",
                )
            )[0]
            for i in ("first", POISON, "third", "fourth")
        ]
        ids = [await trigger(r, token, hooks[0])]
        await agent.wait_for(1, name="first")
        for hook in hooks[1:]:  # each queued before the next is requested: the group's order
            ids.append(await trigger(r, token, hook))
            await eventually(lambda: _queued(settings.database_url, ids[-1]))
        hold.set()
        outcomes = [await finished(r, token, i, timeout=30) for i in ids]
        assert [o["status"] for o in outcomes] == ["success", "failed", "success", "success"]
        poisoned = outcomes[1]
        assert poisoned["error"] == "internal error: Injected: cannot build this body"
        assert [a["errorMessage"] for a in poisoned["attempts"]] == [poisoned["error"]]
        got = [json_body(x)["instruction"] for x in agent.received]
        assert got == ["first", "third", "fourth"]  # in group order, the poison never sent
        assert await dead_letters(settings, "dispatcher") == 0


async def _queued(dsn: str, delivery_id: int) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(
            await conn.fetchval(
                "select count(*) from eventstore.events where stream = $1 and type = $2",
                f"delivery-{delivery_id}",
                "delivery.queued",
            )
        )
    finally:
        await conn.close()


def json_body(received: Received) -> dict[str, Any]:
    body: dict[str, Any] = received.body
    return body


async def test_judging_that_fails_ends_the_attempt_failed_and_it_is_retried(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A step after the POST that raises ends the attempt — failed, `internal error: …`,
    retried as usual — without sending the request again and again."""
    classify = dispatcher_deliver.classify
    calls: list[int] = []

    def broken(result: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise Injected("cannot judge this answer")
        return classify(result)

    monkeypatch.setattr(dispatcher_deliver, "classify", broken)
    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        hook, _ = await create_webhook(r, token, agent.url, maxRetries=1)
        delivery_id = await trigger(r, token, hook)
        await agent.wait_for(1)

        async def retry_pending() -> dict[str, Any] | None:
            _, body = await r.graphql(
                token,
                "query($id: Int!) { cronWebhookDelivery(id: $id) {"
                " status nextAttemptAt attempts { errorMessage } } }",
                {"id": delivery_id},
            )
            d: dict[str, Any] = body["data"]["cronWebhookDelivery"]
            return d if d["nextAttemptAt"] else None

        d = await eventually(retry_pending)
        assert d["attempts"] == [
            {"errorMessage": "internal error: Injected: cannot judge this answer"}
        ]
        assert len(agent.received) == 1  # sent once, not once per handling try
        clock.set(datetime.fromisoformat(d["nextAttemptAt"]))
        assert (await finished(r, token, delivery_id))["status"] == "success"


async def test_an_import_that_keeps_failing_is_rejected_and_its_attempt_ends(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    apply = imports.apply_changes

    async def broken(conn: Any, changes: Any, **kw: Any) -> Any:
        if any(c.path == "poison.md" for c in changes):
            raise Injected("cannot apply this batch")
        return await apply(conn, changes, **kw)

    monkeypatch.setattr(imports, "apply_changes", broken)

    async def answer(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response(
            {"status": "ok", "changes": [{"path": "poison.md", "content": "x"}]}
        )

    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        url = agent.url_for("writer", answer)
        hook, _ = await create_webhook(r, token, url, writePatterns=["*"])
        done = await finished(r, token, await trigger(r, token, hook), timeout=30)
        assert done["status"] == "failed"
        assert (
            done["error"] == "changes rejected: internal error: Injected: cannot apply this batch"
        )
        assert await dead_letters(settings, "importer") == 0


async def test_a_fire_that_cannot_be_sent_ends_failed(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    def broken(self: Any, key: Any, d: dict[str, Any], now: datetime) -> str:
        raise Injected("cannot sign this fire")

    monkeypatch.setattr(dispatcher_fire.FireCaller, "token", broken)
    async with running(settings, clock) as r:
        admin = await admin_token(settings.database_url)
        callback = f"http://127.0.0.1:{agent.port}/cb"
        agent_id = await provision_now(r, admin, callback, clock.now().isoformat())
        job = await trigger_ended(r, admin, agent_id)
        assert (job["state"], job["lastOutcome"]) == ("failed", "failed")
        assert job["lastError"] == "internal error: Injected: cannot sign this fire"
        assert agent.received == []
        assert await dead_letters(settings, "dispatcher") == 0


async def test_a_retry_the_scheduler_cannot_schedule_ends_its_delivery(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Without its retry timer a delivery would wait for nothing: it fails for good."""

    def broken(event: Any, failed: Any) -> Any:
        raise Injected("cannot make this timer")

    monkeypatch.setattr(scheduler_retries, "retry_timer", broken)

    async def busy(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=503)

    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        url = agent.url_for("busy", busy)
        hook, _ = await create_webhook(r, token, url, maxRetries=2, concurrencyPolicy="FORBID")
        done = await finished(r, token, await trigger(r, token, hook), timeout=30)
        assert (done["status"], done["error"]) == (
            "failed",
            "internal error: Injected: cannot make this timer",
        )
        assert await dead_letters(settings, "scheduler") == 0


async def test_a_fire_retry_the_scheduler_cannot_schedule_ends_the_fire(
    settings: Settings, clock: ManualClock, agent: Agent, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    def broken(event: Any, failed: Any) -> Any:
        raise Injected("cannot make this timer")

    monkeypatch.setattr(scheduler_triggers, "fire_retry_timer", broken)

    async def busy(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=503)

    agent.url_for("cb/api/cron/fire", busy)
    async with running(settings, clock) as r:
        admin = await admin_token(settings.database_url)
        callback = f"http://127.0.0.1:{agent.port}/cb"
        agent_id = await provision_now(r, admin, callback, clock.now().isoformat())
        job = await trigger_ended(r, admin, agent_id)
        assert (job["state"], job["lastOutcome"]) == ("failed", "failed")
        assert job["lastError"] == "internal error: Injected: cannot make this timer"
        assert await dead_letters(settings, "scheduler") == 0
