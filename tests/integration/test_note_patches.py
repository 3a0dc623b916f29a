"""Change items with a `kind`, patches and no-op writes (CONTRACT §16.1) on the running
services: the token API's answers (200, 409, 400 with the exact errors), the agent and
admin GraphQL `pushNotes`, a real agent answering a patch, and no-op writes that make no
version, no `note.changed` and no change delivery."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web

from cronhooks_importer.rules import content_hash
from tests.support.agent import Agent, Received
from tests.support.flows import (
    create_change_webhook,
    create_webhook,
    events_of,
    finished,
    retry_due,
    trigger,
)
from tests.support.graphql import COMMIT_NOTES, PUSH_NOTES
from tests.support.inprocess import eventually
from tests.support.system import System
from tests.support.token_api import NOW, agent_graphql, call, mint, push

pytestmark = pytest.mark.system(start=NOW, open_webhook=True)


def patch(path: str, find: Any, replace: Any = None, **more: Any) -> dict[str, Any]:
    change = {"kind": "patch", "path": path, "find": find, **more}
    if replace is not None:
        change["replace"] = replace
    return change


async def note(system: System, token: str, path: str) -> dict[str, Any]:
    status, body = await call(system, "GET", f"/api/notes/{path}", token)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


async def versions(system: System, path: str) -> list[tuple[str, int]]:
    return [
        (e["data"]["event"], e["data"]["version"])
        for e in await events_of(system.dsn, f"note-{path}")
    ]


def answer_with(*changes: dict[str, Any]):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response({"status": "ok", "changes": list(changes)})

    return respond


# --- POST /api/notes --------------------------------------------------------------------


async def test_a_patch_over_rest_applies_and_each_error_is_named(system: System) -> None:
    token = mint(system.settings)
    await push(system, token, {"path": "p.md", "content": "# Title\nold line\nend"})
    await push(system, token, {"path": "twice.md", "content": "x and x"})

    status, body = await push(system, token, patch("p.md", "old", "new"))
    assert status == 200
    assert body == {
        "applied": [
            {"path": "p.md", "content_hash": content_hash("# Title\nnew line\nend"), "version": 2}
        ]
    }
    assert (await note(system, token, "p.md"))["content"] == "# Title\nnew line\nend"
    # expected_hash is checked against the note before the patch
    status, body = await push(
        system,
        token,
        patch("p.md", "end", "END", expected_hash=content_hash("# Title\nnew line\nend")),
    )
    assert status == 200 and body["applied"][0]["version"] == 3

    # the errors that depend on the note: 409, one per offending change, nothing written
    status, body = await push(
        system,
        token,
        {"path": "fine.md", "content": "would be written"},
        patch("missing.md", "x", "y"),
        patch("p.md", "nowhere", "y"),
        patch("twice.md", "x", "y"),
        patch("p.md".replace("p", "q"), "x"),
    )
    assert status == 409
    assert body["errors"] == [
        {"path": "missing.md", "error": "note not found for patch: missing.md"},
        {"path": "p.md", "error": "patch find string not found in p.md"},
        {"path": "twice.md", "error": "patch find string is ambiguous (2 occurrences) in twice.md"},
        {"path": "q.md", "error": "note not found for patch: q.md"},
    ]
    assert (await call(system, "GET", "/api/notes/fine.md", token))[0] == 404
    status, body = await push(system, token, patch("p.md", "END", "x", expected_hash="a" * 64))
    assert status == 409 and body["errors"][0]["error"].startswith("expected_hash mismatch")

    # the errors of the input itself: 400
    status, body = await push(system, token, patch("p.md", ""), {"kind": "delete", "path": "p.md"})
    assert status == 400
    assert body["errors"] == [
        {"path": "p.md", "error": "find is required for a patch"},
        {"path": "p.md", "error": 'unknown change kind "delete"'},
    ]
    # a path at most once in a batch, patches too
    status, body = await push(
        system, token, patch("p.md", "END", "x"), {"path": "p.md", "content": "y"}
    )
    assert status == 400 and body["errors"] == [
        {"path": "p.md", "error": "path appears twice in the batch"}
    ]
    # every kind of write is a write
    for n, kind in enumerate(("", "upsert", "write")):
        status, body = await push(system, token, {"kind": kind, "path": "k.md", "content": str(n)})
        assert status == 200 and body["applied"][0]["version"] == n + 1
    assert (await note(system, token, "p.md"))["version"] == 3


# --- the agent GraphQL API and admin pushNotes --------------------------------------------


async def test_push_notes_over_agent_and_admin_graphql_takes_patches(system: System) -> None:
    token = mint(system.settings)
    await push(system, token, {"path": "g.md", "content": "one two three"})

    status, body = await agent_graphql(
        system,
        token,
        PUSH_NOTES,
        {"input": {"updates": [{"kind": "patch", "path": "g.md", "find": "two", "replace": "2"}]}},
    )
    assert status == 200 and "errors" not in body, body
    [pushed] = body["data"]["pushNotes"]["notes"]
    assert (pushed["version"], pushed["contentHash"]) == (2, content_hash("one 2 three"))

    # content may be left out only by a patch
    updates = [{"path": "g.md"}, {"path": "h.md", "content": None, "kind": "write"}]
    _, body = await agent_graphql(system, token, PUSH_NOTES, {"input": {"updates": updates}})
    payload = body["data"]["pushNotes"]
    assert payload["__typename"] == "ErrorPayload"
    assert payload["errors"] == [
        {"path": "g.md", "error": "content is required unless kind is patch"},
        {"path": "h.md", "error": "content is required unless kind is patch"},
    ]

    # a staged patch is resolved when committed
    staged = {"kind": "patch", "path": "g.md", "find": "three", "replace": "3"}
    _, body = await agent_graphql(
        system, token, PUSH_NOTES, {"input": {"updates": [staged], "skipCommit": True}}
    )
    [pushed] = body["data"]["pushNotes"]["notes"]
    assert (pushed["version"], pushed["contentHash"]) == (0, "")
    _, body = await agent_graphql(system, token, COMMIT_NOTES)
    assert body["data"]["commitNotes"] == {"__typename": "CommitNotesPayload", "success": True}
    assert (await note(system, token, "g.md"))["content"] == "one 2 3"

    # the admin's pushNotes forwards patches (and their errors) to the importer
    _, body = await system.graphql(
        system.admin,
        PUSH_NOTES,
        {"input": {"updates": [{"kind": "patch", "path": "g.md", "find": "one", "replace": "1"}]}},
    )
    [pushed] = body["data"]["pushNotes"]["notes"]
    assert (pushed["version"], pushed["contentHash"]) == (4, content_hash("1 2 3"))
    _, body = await system.graphql(
        system.admin,
        PUSH_NOTES,
        {"input": {"updates": [{"kind": "patch", "path": "g.md", "find": " "}]}},
    )
    assert body["data"]["pushNotes"]["errors"] == [
        {"path": "g.md", "error": "patch find string is ambiguous (2 occurrences) in g.md"}
    ]
    _, body = await system.graphql(
        system.admin, PUSH_NOTES, {"input": {"updates": [{"path": "g.md"}]}}
    )
    assert body["data"]["pushNotes"]["errors"] == [
        {"path": "g.md", "error": "content is required unless kind is patch"}
    ]


# --- a real agent answering a patch -------------------------------------------------------


async def test_a_synchronous_answer_with_a_patch_is_imported(system: System) -> None:
    token = mint(system.settings)
    await push(system, token, {"path": "digests/today.md", "content": "status: draft\n"})
    agent = await Agent().start()
    try:
        good = agent.url_for("good", answer_with(patch("digests/today.md", "draft", "final")))
        hook_id, _ = await create_webhook(system, system.admin, good, writePatterns=["digests/*"])
        d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
        assert d["status"] == "success", d
        got = await note(system, token, "digests/today.md")
        assert (got["content"], got["version"], got["depth"]) == ("status: final\n", 2, 1)

        # a patch that cannot apply fails the attempt and is the retry's previous_error
        bad = agent.url_for("bad", answer_with(patch("digests/today.md", "draft", "x")))
        hook_id, _ = await create_webhook(
            system, system.admin, bad, writePatterns=["digests/*"], maxRetries=1
        )
        delivery_id = await trigger(system, system.admin, hook_id)
        await eventually(lambda: retry_due(system.dsn, delivery_id))
        system.clock.advance(timedelta(seconds=10))
        d = await finished(system, system.admin, delivery_id)
        error = "digests/today.md: patch find string not found in digests/today.md"
        assert d["status"] == "failed" and error in d["error"]
        _first, second = agent.at("bad")
        assert second.body["previous_error"] == f"changes rejected: {error}"
    finally:
        await agent.stop()
    assert (await note(system, token, "digests/today.md"))["version"] == 2


# --- no-op writes ---------------------------------------------------------------------------


async def quiet(agent: Agent, seconds: float = 1.5) -> int:
    """How many requests the agent has, once none arrived for `seconds`."""
    count = -1
    while count != len(agent.received):
        count = len(agent.received)
        await asyncio.sleep(seconds)
    return count


async def test_a_noop_write_makes_no_version_no_event_and_no_change_delivery(
    system: System,
) -> None:
    await create_change_webhook(
        system, system.admin, system.agent.url, includePatterns=["*"], maxDepth=3
    )
    token = mint(system.settings)
    status, body = await push(system, token, {"path": "n.md", "content": "same"})
    assert status == 200
    await system.agent.wait_for(1)

    # the same content again, as a write and as a patch that changes nothing
    same = {"path": "n.md", "content_hash": content_hash("same"), "version": 1}
    for change in ({"path": "n.md", "content": "same"}, patch("n.md", "same", "same")):
        status, body = await push(system, token, change)
        assert status == 200 and body == {"applied": [same]}
    _, body = await agent_graphql(
        system, token, PUSH_NOTES, {"input": {"updates": [{"path": "n.md", "content": "same"}]}}
    )
    assert body["data"]["pushNotes"]["notes"][0]["version"] == 1
    assert await quiet(system.agent) == 1
    assert await versions(system, "n.md") == [("create", 1)]
    verdicts = [
        e["data"]["applied"]
        for e in await _push_verdicts(system)
        if e["data"].get("applied") is not None
    ]
    assert verdicts[-1] == []  # notes.imported lists no no-op

    # beside a real change, a no-op is left out of the delivery
    status, body = await push(
        system, token, {"path": "n.md", "content": "same"}, {"path": "m.md", "content": "new"}
    )
    assert status == 200 and body["applied"][0] == same
    [_, got] = await system.agent.wait_for(2)
    assert [c["path"] for c in got.body["changes"]] == ["m.md"]
    assert await versions(system, "n.md") == [("create", 1)]


async def _push_verdicts(system: System) -> list[Any]:
    from cronhooks_common import db

    conn = await db.connect(system.dsn, name="test")
    try:
        return await conn.fetch(  # type: ignore[no-any-return]
            "select data from eventstore.events where stream like 'push-%'"
            " and type = 'notes.imported' order by position"
        )
    finally:
        await conn.close()
