"""A wrong CRONHOOKS_SECRET_KEY for the database (issue 41: a second clone writes a new key
into its .env and finds the first clone's database), with the real processes: a service
exits at once with one line naming the variable and .env, having taken nothing from the
broker; `cronhooks up` says which services stopped and why, and stops (no restart loop).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest

from cronhooks_common import broker
from cronhooks_common.settings import Settings
from tests.support import rabbit
from tests.support.agent import Agent
from tests.support.graphql import CREATE_WEBHOOK, DELIVERY
from tests.support.inprocess import eventually
from tests.support.processes import (
    SERVICES,
    cli,
    cluster,
    service_log,
    up_until_it_stops,
    with_free_ports,
)

pytestmark = pytest.mark.e2e

WRONG = "a-second-clone-0123456789abcdef0123456789abcdef"
WHY = "CRONHOOKS_SECRET_KEY cannot open the secrets stored in the database"


async def queue_counts(amqp_url: str, vhost: str) -> dict[str, int]:
    """Every queue of the vhost and its messages, counted live (passive declares)."""
    async with (
        aiohttp.ClientSession(headers=rabbit.AUTH) as session,
        session.get(f"{rabbit.MANAGEMENT}/queues/{quote(vhost, safe='')}") as r,
    ):
        names = [q["name"] for q in await r.json()]
    amqp = await broker.connect(amqp_url, name="queue-counts")
    try:
        channel = await amqp.channel()
        counts = {}
        for name in names:
            queue = await channel.declare_queue(name, passive=True)
            counts[name] = int(queue.declaration_result.message_count or 0)
        return counts
    finally:
        await amqp.close()


async def test_a_service_with_a_wrong_key_exits_at_once_and_takes_nothing(
    settings: Settings, vhost: str, agent: Agent
) -> None:
    async with cluster(settings) as c:
        token = await c.admin_token()
        created = await c.graphql(
            token,
            CREATE_WEBHOOK,
            {"input": {"url": agent.url, "cronSchedule": "0 0 1 1 *", "instruction": "x"}},
        )
        hook = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
        await c.stop("dispatcher")
        answer = await c.graphql(
            token, f"mutation {{ triggerCronWebhook(webhookId: {hook}) {{ deliveryId }} }}"
        )
        delivery = answer["data"]["triggerCronWebhook"]["deliveryId"]

        async def waiting() -> dict[str, int] | None:
            counts = await queue_counts(settings.amqp_url, vhost)
            return counts if sum(counts.values()) else None

        before = await eventually(waiting, timeout=15)

        log = service_log("wrong-key")
        start = log.stat().st_size if log.exists() else 0
        await c.start("dispatcher", name="wrong-key", env={"CRONHOOKS_SECRET_KEY": WRONG})
        proc = c.procs.pop("wrong-key")
        assert await asyncio.wait_for(proc.wait(), 20) == 2
        said = log.read_bytes()[start:].decode()
        lines = said.strip().splitlines()
        assert len(lines) == 1, said  # one line, and nothing else
        assert lines[0].startswith(f"cronhooks dispatcher: {WHY}")
        assert ".env" in lines[0] and "CRONHOOKS_SECRET_KEY_PREVIOUS" in lines[0]

        after = await queue_counts(settings.amqp_url, vhost)
        assert after == before, "nothing taken from any queue"
        assert not any(n for q, n in after.items() if q.endswith(".dead"))
        got = await c.graphql(token, DELIVERY, {"id": delivery})
        assert got["data"]["cronWebhookDelivery"]["status"] == "pending"
        assert agent.received == []

        # With its key, the dispatcher delivers what waited.
        await c.start("dispatcher")
        await agent.wait_for(1, timeout=20)


async def test_cronhooks_up_with_a_wrong_key_names_the_services_and_stops(
    settings: Settings, tmp_path: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRONHOOKS_")},
        **with_free_ports(settings),
    }
    code, _, err = await cli(env, "migrate")  # the database's key: the tests' own
    assert code == 0, err
    env["CRONHOOKS_SECRET_KEY"] = WRONG
    code, out, err = await up_until_it_stops(env, tmp_path)
    assert code == 2, err
    lines = err.strip().splitlines()
    summary = [line for line in lines if line.startswith("cronhooks up: ")]
    assert len(summary) == 1, err
    stopped, _, why = summary[0].removeprefix("cronhooks up: ").partition(" stopped: ")
    assert why.startswith(WHY) and ".env" in why
    # Each service that found the key wrong is named, and said so once: none restarted.
    said = [s for s in SERVICES if f"cronhooks {s}: {WHY}" in err]
    assert said and sorted(stopped.split(", ")) == sorted(said), err
    for service in said:
        assert err.count(f"cronhooks {service}: {WHY}") == 1, err
    assert "services_not_ready" not in err + out


async def test_secrets_reseal_says_what_it_did_and_how_to_finish(settings: Settings) -> None:
    old = settings.to_env()
    assert (await cli(old, "migrate"))[0] == 0  # the probe, sealed under the old key
    rotated = {
        **old,
        "CRONHOOKS_SECRET_KEY": WRONG,
        "CRONHOOKS_SECRET_KEY_PREVIOUS": old["CRONHOOKS_SECRET_KEY"],
    }
    code, out, err = await cli(rotated, "secrets", "reseal")
    assert code == 0, err
    assert "shared.secret_key_probe: 1 resealed, 0 already current, 0 unreadable" in out
    assert "remove CRONHOOKS_SECRET_KEY_PREVIOUS" in out
    code, out, err = await cli(rotated, "secrets", "reseal")
    assert code == 0 and "shared.secret_key_probe: 0 resealed, 1 already current" in out
    new_only = {**old, "CRONHOOKS_SECRET_KEY": WRONG}
    assert (await cli(new_only, "migrate"))[0] == 0, "the new key alone opens everything"
    code, _, err = await cli(old, "secrets", "reseal")
    assert code == 2 and err.startswith(f"cronhooks secrets reseal: {WHY}"), err


async def test_keys_rotate_refuses_to_seal_a_key_with_a_wrong_key(settings: Settings) -> None:
    env = settings.to_env()
    assert (await cli(env, "migrate"))[0] == 0
    code, _, err = await cli({**env, "CRONHOOKS_SECRET_KEY": WRONG}, "keys", "rotate")
    assert code == 2 and err.startswith(f"cronhooks keys rotate: {WHY}"), err
    code, out, err = await cli(env, "keys", "rotate")
    assert code == 0 and "signing now with" in out, err


async def test_make_ups_terminal_hears_why_when_logs_go_to_a_file(
    settings: Settings, tmp_path: Path
) -> None:
    """`make up` sends logs to a file: the line saying which service stopped and why still
    reaches the terminal (stdout), and the log file holds the services' own lines."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRONHOOKS_")},
        **with_free_ports(settings),
    }
    code, _, err = await cli(env, "migrate")
    assert code == 0, err
    env["CRONHOOKS_SECRET_KEY"] = WRONG
    code, out, _ = await up_until_it_stops(env, tmp_path, "--log-file", "up.log")
    assert code == 2, out
    terminal = out.strip().splitlines()
    assert terminal[0] == "cronhooks up: migrations and service logs go to up.log", out
    summary = [line for line in terminal if line.startswith("cronhooks up: ") and "stopped" in line]
    assert len(summary) == 1 and WHY in summary[0], out
    logged = (tmp_path / "up.log").read_text()
    assert any(f"cronhooks {s}: {WHY}" in logged for s in SERVICES), logged
