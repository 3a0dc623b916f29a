"""Address literals in odd spellings (CONTRACT §15) on the running services with private
targets refused: every create path refuses them naming its field, and a URL stored while
private targets were allowed is blocked at send time before any connection is made —
a real loopback agent shows that nothing reached it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import pytest

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from cronhooks_common.targets import connector_kwargs
from cronhooks_dispatcher import sender
from tests.support.agent import Agent
from tests.support.flows import agent_cron, create_webhook, finished, trigger
from tests.support.graphql import CREATE_AGENT, CREATE_WEBHOOK
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.system import System

# Each one is a private address in a spelling the resolver accepts, with what it means.
ODD_LITERALS = [
    ("2852039166", "169.254.169.254 is the cloud metadata address"),
    ("0251.0376.0251.0376", "169.254.169.254 is the cloud metadata address"),
    ("167772161", "10.0.0.1 is a private address"),
    ("127.1", "127.0.0.1 is a loopback address"),
    ("0", "0.0.0.0 is an unspecified address"),
    ("127.0.0.1.", "127.0.0.1 is a loopback address"),
    ("0x7f.1", "127.0.0.1 is a loopback address"),
    ("0x7f000001", "127.0.0.1 is a loopback address"),
    ("[::ffff:127.0.0.1]", "127.0.0.1 is a loopback address"),
    ("[::ffff:7f00:1]", "127.0.0.1 is a loopback address"),
    ("localhost.", "localhost. is a loopback name"),
    # Full-width digits: the client IDNA-maps them to 127.0.0.1 and connects directly.
    ("１２７.0.0.1", "127.0.0.1 is a loopback address"),
]


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def strict(settings: Settings) -> Settings:
    return dataclasses.replace(settings, allow_private_targets=False)


pytestmark = pytest.mark.system(settings={"allow_private_targets": False})


def refusal(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The extensions and message of a GraphQL answer's only error."""
    [error] = body["errors"]
    return error["extensions"], error["message"]


@pytest.mark.parametrize(("host", "meaning"), ODD_LITERALS)
async def test_create_paths_refuse_the_literal_naming_their_field(
    system: System, host: str, meaning: str
) -> None:
    url = f"http://{host}:8080/hook"
    _, body = await system.graphql(
        system.admin, CREATE_WEBHOOK, {"input": {"url": url, "cronSchedule": "* * * * *"}}
    )
    extensions, message = refusal(body)
    assert extensions == {"code": "BAD_USER_INPUT", "field": "url"}
    assert meaning in message and "private targets are not allowed" in message

    _, body = await system.graphql(
        system.admin, CREATE_AGENT, {"input": {"instanceId": "a", "callbackUrl": url}}
    )
    extensions, message = refusal(body)
    assert extensions == {"code": "BAD_USER_INPUT", "field": "callbackUrl"}
    assert meaning in message

    # An agent with a public callback cannot provision a fire to the literal either.
    _, body = await system.graphql(
        system.admin,
        CREATE_AGENT,
        {"input": {"instanceId": "b", "callbackUrl": "https://agent.example"}},
    )
    token = body["data"]["createAgent"]["accessToken"]
    status, answer = await provision(system, token, {"job_id": "j", "agent_callback_url": url})
    assert status == 400 and answer["field"] == "agent_callback_url"
    assert meaning in answer["error"]


async def test_public_literals_count_only_in_the_plain_spelling(
    system: System,
) -> None:
    _, body = await system.graphql(
        system.admin,
        CREATE_WEBHOOK,
        {"input": {"url": "http://8.8.8.8/", "cronSchedule": "* * * * *"}},
    )
    assert "errors" not in body, body
    # 134744072 is 8.8.8.8 too; refused with the spelling to use (see targets.py for why).
    _, body = await system.graphql(
        system.admin,
        CREATE_WEBHOOK,
        {"input": {"url": "http://134744072/", "cronSchedule": "* * * * *"}},
    )
    extensions, message = refusal(body)
    assert extensions == {"code": "BAD_USER_INPUT", "field": "url"}
    assert "134744072 is a non-canonical spelling of 8.8.8.8 (write 8.8.8.8)" in message


async def provision(r: Running | System, token: str, fields: dict[str, Any]) -> tuple[int, Any]:
    body = {"fire_at": (now() + timedelta(hours=1)).isoformat(), **fields}
    return await agent_cron(r, token, "POST", "provision", body)


async def test_stored_webhooks_to_odd_literals_are_blocked_at_send_time(
    settings: Settings,
) -> None:
    agent = await Agent().start()
    clock = ManualClock(now())
    hooks: dict[str, int] = {}
    try:
        # Private targets allowed (an older configuration): the URLs are stored, and a hex
        # spelling really does reach the loopback agent.
        async with running(settings, clock) as r:
            admin = await admin_token(settings.database_url)
            for host, _ in ODD_LITERALS:
                hooks[host], _ = await create_webhook(r, admin, f"http://{host}:{agent.port}/x")
            control = await finished(r, admin, await trigger(r, admin, hooks["0x7f.1"]))
            assert control["status"] == "success", control
            assert len(agent.received) == 1
        # Private targets refused now: every one is blocked, nothing more arrives.
        async with running(strict(settings), clock) as r:
            for host, meaning in ODD_LITERALS:
                d = await finished(r, admin, await trigger(r, admin, hooks[host]))
                assert d["status"] == "failed" and d["responseStatus"] is None, (host, d)
                assert d["error"].startswith(f"blocked: {meaning}"), (host, d["error"])
        assert len(agent.received) == 1
    finally:
        await agent.stop()


async def test_a_stored_agent_callback_to_an_odd_literal_is_blocked_at_fire_time(
    settings: Settings,
) -> None:
    agent = await Agent().start()
    clock = ManualClock(now())
    fire_at = clock.now() + timedelta(seconds=30)
    try:
        async with running(settings, clock) as r:
            admin = await admin_token(settings.database_url)
            _, body = await r.graphql(
                admin,
                CREATE_AGENT,
                {"input": {"instanceId": "i", "callbackUrl": f"http://0x7f000001:{agent.port}"}},
            )
            token = body["data"]["createAgent"]["accessToken"]
            status, _ = await provision(r, token, {"job_id": "j", "fire_at": fire_at.isoformat()})
            assert status == 200
        async with running(strict(settings), clock) as r:
            clock.set(fire_at)
            error = await eventually(lambda: first_fire_error(settings.database_url))
            assert error.startswith("blocked: 127.0.0.1 is a loopback address (written 0x7f000001)")
        assert agent.received == []
    finally:
        await agent.stop()


async def first_fire_error(dsn: str) -> str | None:
    conn = await asyncpg.connect(dsn)
    try:
        error: str | None = await conn.fetchval(
            "select data->>'error' from eventstore.events"
            " where type in ('trigger.attempt_failed', 'trigger.fired') order by position limit 1"
        )
        return error
    finally:
        await conn.close()


@pytest.mark.parametrize(("host", "meaning"), ODD_LITERALS)
async def test_the_sender_blocks_the_literal_before_connecting(
    host: str, meaning: str, agent: Agent
) -> None:
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(**connector_kwargs(False))
    ) as http:
        result = await sender.post(
            http,
            f"http://{host}:{agent.port}/hook",
            body=b"{}",
            headers={},
            timeout_seconds=2,
            allow_private=False,
        )
    assert result.status is None and result.error is not None
    assert result.error.startswith(f"blocked: {meaning}"), result.error
    assert agent.received == []
