"""Which run started which (CONTRACT §16.3) on the running services, with real agents on
loopback: a chain started by a cron delivery's synchronous answer and continued through a
change delivery's api_token; roots from admin and API-key writes; a retry keeps its trace;
deliveryChain; Note.writtenBy."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from aiohttp import web

from tests.support.agent import Received
from tests.support.flows import (
    create_api_key,
    create_change_webhook,
    create_webhook,
    finished,
    push_notes,
    retry_due,
    trigger,
)
from tests.support.inprocess import eventually
from tests.support.system import System
from tests.support.token_api import call

CHAIN = """query($trace: String!) { deliveryChain(trace: $trace) { id trace parent status } }"""
WRITTEN_BY = """query($path: String!) { note(path: $path) { version writtenBy } }"""


def traceparent(trace: str, ref: str) -> str:
    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    return f"00-{sha(trace)[:32]}-{sha(ref)[:16]}-01"


async def written_by(system: System, path: str) -> str | None:
    """The note's writtenBy, once admin-api's read model has the note (it follows the
    event store: a delivery can reach the agent before the projector has read the write)."""

    async def note() -> dict[str, Any] | None:
        _, body = await system.graphql(system.admin, WRITTEN_BY, {"path": path})
        found: dict[str, Any] | None = body["data"]["note"]
        return found

    return (await eventually(note))["writtenBy"]  # type: ignore[no-any-return]


async def chain(system: System, trace: str, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        _, body = await system.graphql(system.admin, CHAIN, {"trace": trace})
        found: list[dict[str, Any]] = body["data"]["deliveryChain"]
        return found if len(found) == count else None

    return await eventually(listed)  # type: ignore[no-any-return]


async def test_a_cron_answer_and_a_change_token_write_continue_one_chain(system: System) -> None:
    async def digest(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response({"status": "ok", "changes": [{"path": "a.md", "content": "a"}]})

    async def follower(_: web.Request, got: Received) -> web.StreamResponse:
        if got.body["changes"][0]["path"] == "a.md":  # writes once, through its token
            status, _ = await call(
                system,
                "POST",
                "/api/notes",
                token=got.body["api_token"],
                body={"changes": [{"path": "b.md", "content": "b"}]},
            )
            assert status == 200
        return web.json_response({"status": "ok"})

    cron_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for("digest", digest), writePatterns=["a.md"]
    )
    await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("follower", follower),
        includePatterns=["a.md", "b.md"],
        maxDepth=3,
        passApiKey=True,
        writePatterns=["b.md"],
    )
    root = await trigger(system, system.admin, cron_id)
    [a] = await system.agent.wait_for(1, name="digest")
    first, second = await system.agent.wait_for(2, name="follower")

    # the cron delivery is its own root: trace itself, no parent key, header exact
    assert a.body["trace"] == f"cron:{root}" and "parent" not in a.body
    assert a.headers["traceparent"] == traceparent(f"cron:{root}", f"cron:{root}")
    # its answer's note fired the follower: parent the cron delivery, the same trace
    one, two = first.body["id"], second.body["id"]
    assert (first.body["trace"], first.body["parent"]) == (f"cron:{root}", f"cron:{root}")
    assert first.headers["traceparent"] == traceparent(f"cron:{root}", f"change:{one}")
    # the follower's token write fired it again: parent the follower's first delivery
    assert (second.body["trace"], second.body["parent"]) == (f"cron:{root}", f"change:{one}")
    assert second.headers["traceparent"] == traceparent(f"cron:{root}", f"change:{two}")

    listed = await chain(system, f"cron:{root}", 3)
    assert [(d["id"], d["parent"]) for d in listed] == [
        (root, None),
        (one, f"cron:{root}"),
        (two, f"change:{one}"),
    ]
    assert {d["trace"] for d in listed} == {f"cron:{root}"}
    assert await written_by(system, "a.md") == f"cron:{root}"
    assert await written_by(system, "b.md") == f"change:{one}"
    _, body = await system.graphql(system.admin, CHAIN, {"trace": "cron:999999"})
    assert body["data"]["deliveryChain"] == []


async def test_admin_and_api_key_writes_start_roots(system: System) -> None:
    await create_change_webhook(system, system.admin, system.agent.url, includePatterns=["*"])
    await push_notes(system, system.admin, ("admin.md", "x"))
    [by_admin] = await system.agent.wait_for(1)
    _, key = await create_api_key(system, system.admin, "ci")
    status, _ = await call(
        system,
        "POST",
        "/api/notes",
        body={"changes": [{"path": "key.md", "content": "y"}]},
        headers={"X-API-Key": key},
    )
    assert status == 200
    _, by_key = await system.agent.wait_for(2)
    for got in (by_admin, by_key):
        me = f"change:{got.body['id']}"
        assert got.body["trace"] == me and "parent" not in got.body
        assert got.headers["traceparent"] == traceparent(me, me)
    assert await written_by(system, "admin.md") == "admin:test"
    assert await written_by(system, "key.md") == "api_key:ci"
    listed = await chain(system, f"change:{by_admin.body['id']}", 1)
    assert listed[0]["parent"] is None


async def test_a_retry_keeps_its_trace_and_parent(system: System) -> None:
    answers = iter([500, 200])

    async def writer(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response({"status": "ok", "changes": [{"path": "r.md", "content": "r"}]})

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(answers))

    cron_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for("writer", writer), writePatterns=["r.md"]
    )
    await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("flaky", flaky),
        includePatterns=["r.md"],
        maxRetries=1,
        maxDepth=2,
    )
    root = await trigger(system, system.admin, cron_id)
    [first] = await system.agent.wait_for(1, name="flaky")
    await eventually(lambda: retry_due(system.dsn, first.body["id"]))
    system.clock.advance(timedelta(seconds=10))
    _, second = await system.agent.wait_for(2, name="flaky")
    assert second.body["id"] == first.body["id"] and second.body["attempt"] == 2
    for got in (first, second):
        assert (got.body["trace"], got.body["parent"]) == (f"cron:{root}", f"cron:{root}")
    assert second.headers["traceparent"] == first.headers["traceparent"]
    assert (await finished(system, system.admin, first.body["id"]))["status"] == "success"
    listed = await chain(system, f"cron:{root}", 2)
    assert [d["id"] for d in listed] == [root, first.body["id"]]
