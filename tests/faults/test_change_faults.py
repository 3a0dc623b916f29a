"""Change webhooks under faults (CONTRACT §7, §11): during a burst of note writes, kill -9
the process that matches note batches to change webhooks (the importer) or the dispatcher,
and restart it. After each: every (change webhook, batch) that matches is requested exactly
once and delivered, nothing is requested that does not match, every acknowledged write is
in the store. The expected matches are worked out here with fnmatch, not with the code
under test. Each scenario adds a row to the fault table."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from fnmatch import fnmatchcase
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.processes import ARTIFACTS, Cluster, cluster

pytestmark = pytest.mark.faults

TABLE = ARTIFACTS / "fault-table.md"
BATCHES = 240
CLIENTS = 6
HOOKS = {
    "all": ["burst/*"],
    "a": ["burst/a*"],
    "ones": ["burst/*1.md"],
    "b_or_c": ["burst/b*", "burst/c*"],
}


async def ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


@pytest.fixture
async def burst_cluster(settings: Settings) -> AsyncIterator[tuple[Cluster, Agent]]:
    agent = await Agent(responder=ok).start()
    try:
        async with cluster(settings) as c:
            yield c, agent
    finally:
        await agent.stop()


async def setup(c: Cluster, agent: Agent) -> str:
    """The change webhooks, and an API key to write with (depth 0)."""
    token = (await c.cli("admin", "create-token", "--name", "faults")).split()[-1]
    for name, patterns in HOOKS.items():
        body = await c.graphql(
            token,
            """mutation($i: CreateChangeWebhookInput!) {
            createChangeWebhook(input: $i) { changeWebhook { id } } }""",
            {
                "i": {
                    "url": agent.url,
                    "includePatterns": patterns,
                    "description": name,
                    "maxRetries": 5,
                }
            },
        )
        assert "errors" not in body, body
    body = await c.graphql(token, 'mutation { createApiKey(input: {name: "burst"}) { key } }')
    return str(body["data"]["createApiKey"]["key"])


async def write_batches(c: Cluster, key: str, acknowledged: list[str]) -> None:
    """BATCHES pushes of 1-3 notes from CLIENTS clients; a push that fails (the importer
    is down) is sent again until it is answered."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(BATCHES):
        queue.put_nowait(i)

    async def client(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            changes = [
                {"path": f"burst/{letter}{i}.md", "content": f"batch {i}"}
                for letter in "abc"[: 1 + i % 3]
            ]
            while True:
                try:
                    async with session.post(
                        f"{c.url('importer')}/api/notes",
                        json={"changes": changes},
                        headers={"X-API-Key": key},
                    ) as resp:
                        if resp.status == 200:
                            acknowledged.extend(ch["path"] for ch in changes)
                            break
                except (aiohttp.ClientError, OSError):
                    pass
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.01)

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(session) for _ in range(CLIENTS)))


async def kill_and_restart(c: Cluster, service: str) -> None:
    proc = c.procs.pop(service)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    await asyncio.sleep(0.5)
    await c.start(service)
    await c.wait_ready(service)


def expected_pairs(
    batches: dict[str, list[str]], hooks: dict[int, list[str]]
) -> set[tuple[int, str]]:
    return {
        (hook_id, batch_id)
        for batch_id, paths in batches.items()
        for hook_id, patterns in hooks.items()
        if any(fnmatchcase(p, pattern) for p in paths for pattern in patterns)
    }


async def settle(dsn: str, agent: Agent, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        conn = await asyncpg.connect(dsn)
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                notes = await conn.fetch(
                    "select data->>'batch_id' as batch, data->>'path' as path"
                    " from eventstore.events where type = 'note.changed'"
                )
                requested = await conn.fetch(
                    "select (data->>'delivery_id')::bigint as id, (data->>'webhook_id')::bigint"
                    " as hook, data->>'batch_id' as batch from eventstore.events"
                    " where type = 'delivery.requested' and data->>'kind' = 'change'"
                    " and (data->>'attempt')::int = 1"
                )
                succeeded = {
                    r["id"]
                    for r in await conn.fetch(
                        "select (data->>'delivery_id')::bigint as id from eventstore.events"
                        " where type = 'delivery.succeeded'"
                    )
                }
                hooks = {
                    r["id"]: json.loads(r["patterns"])  # jsonb arrives as text here
                    for r in await conn.fetch(
                        "select (data->>'webhook_id')::bigint as id,"
                        " data->'config'->'include_patterns' as patterns"
                        " from eventstore.events where type = 'webhook.created'"
                    )
                }
                unpublished = await conn.fetchval("select count(*) from eventstore.outbox")
        finally:
            await conn.close()
        batches: dict[str, list[str]] = defaultdict(list)
        for r in notes:
            batches[r["batch"]].append(r["path"])
        expected = expected_pairs(batches, hooks)
        pairs = [(r["hook"], r["batch"]) for r in requested]
        ids = {r["id"] for r in requested}
        received = [r.body["id"] for r in agent.received if r.body.get("kind") == "change"]
        done = set(pairs) >= expected and ids <= succeeded and ids <= set(received)
        if done and unpublished == 0:
            break
        if time.monotonic() > deadline:
            raise AssertionError(
                f"burst did not settle: {len(expected - set(pairs))} matches not requested,"
                f" {len(ids - succeeded)} not succeeded"
            )
        await asyncio.sleep(0.5)
    return {
        "deliveries": len(ids),
        "missing": len(expected - set(pairs)),
        "unexpected": len(set(pairs) - expected),
        "doubled": len(pairs) - len(set(pairs)),
        "lost": len(ids - succeeded) + len(ids - set(received)),
        "agent_duplicates": len(received) - len(set(received)),
        "unpublished": unpublished,
        "paths": {r["path"] for r in notes},
    }


@pytest.mark.parametrize("service", ["importer", "dispatcher"])
async def test_a_note_burst_survives_a_kill(
    service: str, burst_cluster, settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    c, agent = burst_cluster
    key = await setup(c, agent)
    acknowledged: list[str] = []
    writes = asyncio.create_task(write_batches(c, key, acknowledged))
    for _ in range(600):
        if len(agent.received) >= 60:
            break
        await asyncio.sleep(0.05)
    before = len(agent.received)
    started = time.monotonic()
    await kill_and_restart(c, service)
    for _ in range(600):
        if len(agent.received) > before:
            break
        await asyncio.sleep(0.05)
    recovery = time.monotonic() - started
    await writes
    result = await settle(settings.database_url, agent)
    notes_lost = len(set(acknowledged) - result["paths"])
    row = (
        f"| kill -9 {service} during a note burst (change webhooks) | {result['deliveries']} "
        f"| {result['lost']} | {result['doubled']} | {result['missing'] + result['unexpected']} "
        f"| {result['agent_duplicates']} | {result['unpublished']} | {notes_lost} "
        f"| {recovery:.1f} s |"
    )
    print("\n" + row)
    ARTIFACTS.mkdir(exist_ok=True)
    if not TABLE.exists():
        TABLE.write_text(
            "| fault | deliveries | lost | duplicated slots | gaps | agent duplicates "
            "| events unpublished | notes lost | recovery |\n|---|---|---|---|---|---|---|---|---|\n"
        )
    with TABLE.open("a") as table:
        table.write(row + "\n")
    assert result["deliveries"] >= BATCHES  # "all" matches every batch
    assert result["missing"] == 0 and result["unexpected"] == 0 and result["doubled"] == 0
    assert result["lost"] == 0 and result["unpublished"] == 0 and notes_lost == 0
    for name in ("admin-api", "importer", "scheduler", "dispatcher"):
        assert c.procs[name].returncode is None, f"{name} died"
