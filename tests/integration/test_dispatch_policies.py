"""Auto-disable, FORBID, the SSRF guard and durable retries, on the running services."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from cronhooks_common.targets import address_problem
from cronhooks_dispatcher import sender
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, delivery, finished, retry_due, trigger
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.inprocess import admin_token, eventually, running
from tests.support.system import System

UPDATE = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
  cronWebhook { enabled disabledReason consecutiveFailures } } }"""


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


async def fail(_: web.Request, __: Received) -> web.StreamResponse:
    return web.Response(status=500, text="down")


@pytest.mark.system(settings={"auto_disable_after": 3})
async def test_consecutive_failures_disable_and_reenabling_resets(
    system: System, agent: Agent
) -> None:
    hook_id, _ = await create_webhook(system, system.admin, agent.url_for("down", fail))
    for _ in range(2):
        assert (await finished(system, system.admin, await trigger(system, system.admin, hook_id)))[
            "status"
        ] == "failed"
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {hook_id}) {{ enabled consecutiveFailures }} }}"
    )
    assert body["data"]["cronWebhook"] == {"enabled": True, "consecutiveFailures": 2}
    await finished(system, system.admin, await trigger(system, system.admin, hook_id))

    async def disabled() -> dict | None:  # type: ignore[type-arg]
        _, b = await system.graphql(
            system.admin,
            f"{{ cronWebhook(id: {hook_id}) {{ enabled disabledReason consecutiveFailures }} }}",
        )
        hook = b["data"]["cronWebhook"]
        return hook if hook["disabledReason"] else None

    hook = await eventually(disabled)
    assert hook["enabled"] is False and hook["consecutiveFailures"] == 3
    assert "3 consecutive failed deliveries" in hook["disabledReason"]
    assert "HTTP 500: down" in hook["disabledReason"]

    _, body = await system.graphql(
        system.admin, UPDATE, {"input": {"id": hook_id, "enabled": True}}
    )
    assert body["data"]["updateCronWebhook"]["cronWebhook"] == {
        "enabled": True,
        "disabledReason": None,
        "consecutiveFailures": 0,
    }
    # The count starts again from zero: two more failures do not disable it.
    for _ in range(2):
        await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    await asyncio.sleep(0.3)
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook_id}) {{ enabled }} }}")
    assert body["data"]["cronWebhook"]["enabled"] is True


@pytest.mark.system(settings={"auto_disable_after": 3})
async def test_a_success_between_failures_starts_the_count_again(
    system: System, agent: Agent
) -> None:
    """Auto-disable counts *consecutive* failures: after 2 failures and a success, 2 more
    failures (4 in all, limit 3) leave the webhook enabled; a third in a row disables it."""
    down = True

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=500, text="down") if down else web.json_response({})

    hook_id, _ = await create_webhook(system, system.admin, agent.url_for("flaky", flaky))

    async def deliver(expected: str) -> None:
        d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
        assert d["status"] == expected

    for _ in range(2):
        await deliver("failed")
    down = False
    await deliver("success")
    down = True
    for _ in range(2):
        await deliver("failed")
    await asyncio.sleep(0.3)
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook_id}) {{ enabled }} }}")
    assert body["data"]["cronWebhook"]["enabled"] is True
    await deliver("failed")

    async def disabled() -> bool | None:
        _, b = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook_id}) {{ enabled }} }}")
        return True if b["data"]["cronWebhook"]["enabled"] is False else None

    assert await eventually(disabled)


@pytest.mark.system(start=lambda: now().replace(second=0) + timedelta(seconds=30))
async def test_forbid_skips_a_slot_while_a_delivery_is_pending(
    system: System, agent: Agent
) -> None:
    start = system.clock.now()
    release = asyncio.Event()

    async def held(_: web.Request, __: Received) -> web.StreamResponse:
        await release.wait()
        return web.Response(status=200)

    hook_id, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("held", held),
        cronSchedule="* * * * *",
        concurrencyPolicy="FORBID",
        timeoutSeconds=30,
    )
    manual = await trigger(system, system.admin, hook_id)
    await agent.wait_for(1, name="held")  # the manual delivery is in flight
    system.clock.set(start + timedelta(seconds=30))  # the next minute's slot comes

    async def skipped() -> list | None:  # type: ignore[type-arg]
        _, b = await system.graphql(
            system.admin,
            f"{{ cronWebhookDeliveries(cronWebhookId: {hook_id}) {{ id status trigger error }} }}",
        )
        rows = [d for d in b["data"]["cronWebhookDeliveries"] if d["status"] == "skipped"]
        return rows or None

    [skip] = await eventually(skipped)
    assert skip["trigger"] == "SCHEDULE" and "FORBID" in skip["error"]
    assert len(agent.at("held")) == 1
    release.set()
    assert (await finished(system, system.admin, manual))["status"] == "success"
    # With nothing pending any more, the following slot is delivered.
    system.clock.set(start + timedelta(seconds=90))
    await agent.wait_for(2, name="held")


def local_hostname() -> tuple[str, str]:
    """This machine's host name, which resolves (through /etc/hosts) to a local address:
    a real name that only the connect-time guard can catch."""
    name = socket.gethostname()
    address = socket.getaddrinfo(name, 80, socket.AF_INET)[0][4][0]
    assert address_problem(ipaddress.ip_address(address)), f"{name} resolves to {address}"
    return name, str(address)


@pytest.mark.system(settings={"allow_private_targets": False})
async def test_a_name_resolving_to_loopback_is_blocked(system: System, agent: Agent) -> None:
    name, address = local_hostname()
    hook_id, _ = await create_webhook(system, system.admin, f"http://{name}:{agent.port}/hook")
    d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    assert d["status"] == "failed"
    assert d["error"].startswith(f"blocked: {name} resolves to {address} is a"), d["error"]
    assert agent.received == []
    # IP literals are refused when the webhook is created.
    for literal in (
        "http://127.0.0.1:8080/",
        "http://localhost:8080/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:10.0.0.1]/",
        "http://10.1.2.3/",
    ):
        _, body = await system.graphql(
            system.admin, CREATE_WEBHOOK, {"input": {"url": literal, "cronSchedule": "* * * * *"}}
        )
        error = body["errors"][0]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "url"}, literal
        assert "private targets are not allowed" in error["message"]


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:{port}/", "http://[::ffff:127.0.0.1]:{port}/", "http://[::1]:{port}/"]
)
async def test_the_dispatcher_refuses_literal_private_addresses(url: str, agent: Agent) -> None:
    async with sender_session() as http:
        result = await sender.post(
            http,
            url.format(port=agent.port),
            body=b"{}",
            headers={},
            timeout_seconds=2,
            allow_private=False,
        )
    assert result.status is None and result.error is not None
    assert result.error.startswith("blocked:") and "loopback" in result.error
    assert agent.received == []


def sender_session():  # type: ignore[no-untyped-def]
    import aiohttp

    from cronhooks_common.targets import connector_kwargs

    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(**connector_kwargs(False)))


async def test_a_retry_survives_a_restart_of_every_service(
    settings: Settings, agent: Agent
) -> None:
    clock = ManualClock(now())
    answers = iter([500, 200])

    async def once_down(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(answers))

    async with running(settings, clock) as r:
        token = await admin_token(settings.database_url)
        hook_id, _ = await create_webhook(r, token, agent.url_for("once", once_down), maxRetries=1)
        delivery_id = await trigger(r, token, hook_id)
        await eventually(lambda: retry_due(settings.database_url, delivery_id))
    # Every service is down; the retry is a row in the database.
    assert await retry_due(settings.database_url, delivery_id) is not None
    clock.advance(timedelta(seconds=10))
    async with running(settings, clock) as r:
        d = await finished(r, token, delivery_id)
        assert d["status"] == "success" and d["attempt"] == 2
        # a retry is one more attempt of the manual delivery, not a new trigger
        assert (await delivery(r, token, delivery_id))["trigger"] == "MANUAL"
