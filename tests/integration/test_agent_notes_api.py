"""What CONTRACT rev. 2 §5 adds to the agent's note API, on the running services:
`expected_hash` in base64url, `DELETE /api/notes/{path}` (hide), and the agent GraphQL API
(`pushNotes`, `commitNotes`, `hideNotes`, `notePaths`, `note`) with trip2g's names — the
same rules and the same code path as the REST routes."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from cronhooks_importer.rules import content_hash
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, finished, trigger
from tests.support.graphql import COMMIT_NOTES, HIDE_NOTES, PUSH_NOTES
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.system import System
from tests.support.token_api import NOW, agent_graphql, call, mint, open_webhook, push

pytestmark = pytest.mark.system(start=NOW, open_webhook=True)


def b64url(content: str, *, padded: bool = True) -> str:
    """trip2g's form of a content hash: base64.URLEncoding of the SHA-256 digest."""
    encoded = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).decode()
    return encoded if padded else encoded.rstrip("=")


async def note_events(dsn: str, path: str) -> list[dict[str, Any]]:
    return [e["data"] for e in await events_of(dsn, f"note-{path}")]


NOTE = """query($path: String!) { note(path: $path) {
  path content contentHash version depth updatedAt } }"""
PATHS = """query($pattern: String) { notePaths(pattern: $pattern) {
  path latestContentHash version updatedAt } }"""


async def gql_push(
    r: Running, token: str, updates: list[dict[str, Any]], skip_commit: bool | None = None
) -> dict[str, Any]:
    variables: dict[str, Any] = {"input": {"updates": updates}}
    if skip_commit is not None:
        variables["input"]["skipCommit"] = skip_commit
    status, body = await agent_graphql(r, token, PUSH_NOTES, variables)
    assert status == 200 and "errors" not in body, body
    return body["data"]["pushNotes"]  # type: ignore[no-any-return]


# --- expected_hash in base64url ------------------------------------------------------------


async def test_expected_hash_in_base64url_padded_or_not_over_rest_graphql_and_answers(
    system: System,
) -> None:
    token = mint(system.settings)
    assert (await push(system, token, {"path": "t.md", "content": "v1"}))[0] == 200
    status, body = await push(
        system, token, {"path": "t.md", "content": "v2", "expected_hash": b64url("v1")}
    )
    assert status == 200 and body["applied"][0]["version"] == 2
    payload = await gql_push(
        system,
        token,
        [{"path": "t.md", "content": "v3", "expectedHash": b64url("v2", padded=False)}],
    )
    assert payload["__typename"] == "PushNotesPayload"
    assert payload["notes"][0]["version"] == 3
    # A stale hash is a conflict whatever its form; a malformed one is a named error.
    status, body = await push(
        system, token, {"path": "t.md", "content": "x", "expected_hash": b64url("v1")}
    )
    assert status == 409 and "expected_hash mismatch" in body["errors"][0]["error"]
    status, body = await push(
        system, token, {"path": "t.md", "content": "x", "expected_hash": "c2hhMjU2Cg"}
    )
    assert status == 400 and "base64url" in body["errors"][0]["error"]

    # A synchronous answer written by a trip2g agent: base64url too.
    async def answer(_: web.Request, __: Received) -> web.StreamResponse:
        change = {"path": "t.md", "content": "from the agent", "expected_hash": b64url("v3")}
        return web.json_response({"status": "ok", "changes": [change]})

    agent = await Agent().start()
    try:
        hook_id, _ = await create_webhook(
            system, system.admin, agent.url_for("sync", answer), writePatterns=["*"]
        )
        assert (await finished(system, system.admin, await trigger(system, system.admin, hook_id)))[
            "status"
        ] == "success"
    finally:
        await agent.stop()
    status, note = await call(system, "GET", "/api/notes/t.md", token)
    assert note["content"] == "from the agent" and note["version"] == 4


# --- DELETE /api/notes/{path} --------------------------------------------------------------


async def test_delete_hides_a_note_and_a_later_write_recreates_it(system: System) -> None:
    token = mint(system.settings, read=["d/*"], write=["d/*"])
    await push(
        system,
        token,
        {"path": "d/gone.md", "content": "bye"},
        {"path": "d/stay.md", "content": "s"},
    )
    assert (await push(system, token, {"path": "d/gone.md", "content": "bye2"}))[0] == 200

    # 409 on a stale hash (in either form), 403 outside write_patterns, 404 when absent
    status, _ = await call(
        system, "DELETE", f"/api/notes/d/gone.md?expected_hash={content_hash('bye')}", token
    )
    assert status == 409
    assert (await call(system, "DELETE", "/api/notes/other/x.md", token))[0] == 403
    assert (await call(system, "DELETE", "/api/notes/d/never.md", token))[0] == 404
    status, body = await call(
        system,
        "DELETE",
        f"/api/notes/d/gone.md?expected_hash={b64url('bye2', padded=False)}",
        token,
    )
    assert status == 200 and body == {"removed": {"path": "d/gone.md", "version": 3}}

    # Hidden: reads answer 404, lists skip it, a second delete is 404, admins see null.
    assert (await call(system, "GET", "/api/notes/d/gone.md", token))[0] == 404
    _, listing = await call(system, "GET", "/api/notes?pattern=d/*", token)
    assert [n["path"] for n in listing["notes"]] == ["d/stay.md"]
    assert (await call(system, "DELETE", "/api/notes/d/gone.md", token))[0] == 404

    async def admin_sees_it_hidden() -> bool:  # the read model follows the events
        _, body = await system.graphql(
            system.admin, '{ note(path: "d/gone.md") { path } notes(pattern: "d/*") { path } }'
        )
        return body["data"] == {"note": None, "notes": [{"path": "d/stay.md"}]}

    await eventually(admin_sees_it_hidden)

    # expected_hash "" (must not exist) passes for a hidden note: it is recreated.
    status, body = await push(
        system, token, {"path": "d/gone.md", "content": "back", "expected_hash": ""}
    )
    assert status == 200 and body["applied"][0]["version"] == 4
    events = await note_events(system.dsn, "d/gone.md")
    assert [(e["event"], e["version"], e["content"]) for e in events] == [
        ("create", 1, "bye"),
        ("update", 2, "bye2"),
        ("remove", 3, None),
        ("create", 4, "back"),
    ]
    assert events[2]["content_hash"] is None and events[2]["previous_hash"] == content_hash("bye2")
    assert len({e["batch_id"] for e in events}) == 4
    note = await eventually(lambda: admin_note(system, system.admin, "d/gone.md"))
    assert note == {
        "content": "back",
        "contentHash": content_hash("back"),
        "version": 4,
        "event": "create",
    }


async def admin_note(r: Running, admin: str, path: str) -> dict[str, Any] | None:
    _, body = await r.graphql(
        admin,
        "query($p: String!) { note(path: $p) { content contentHash version event } }",
        {"p": path},
    )
    note = body["data"]["note"]
    return note if note and note["version"] >= 4 else None


@pytest.mark.parametrize("path", ["a%00b", "%00", "a%0Ab", "..%2Fetc", "a//b", "%2Fabs"])
async def test_a_bad_path_in_the_url_is_400_naming_the_rule(system: System, path: str) -> None:
    token = mint(system.settings)
    for method in ("GET", "DELETE"):
        status, body = await call(system, method, f"/api/notes/{path}", token)
        assert status == 400 and "path" in body["error"], (method, path, body)


# --- the agent GraphQL API ------------------------------------------------------------------


async def test_push_notes_is_atomic_and_answers_trip2g_types(system: System) -> None:
    token = mint(system.settings, read=["*"], write=["blog/*"])
    payload = await gql_push(
        system,
        token,
        [
            {"path": "blog/a.md", "content": "A", "expectedHash": ""},
            {"path": "blog/b.md", "content": "B"},
        ],
    )
    assert payload["__typename"] == "PushNotesPayload"
    [a, b] = payload["notes"]
    assert (a["path"], a["contentHash"], a["version"], a["assets"]) == (
        "blog/a.md",
        content_hash("A"),
        1,
        [],
    )
    assert isinstance(a["id"], int) and a["id"] != b["id"]
    # ids are stable per path
    again = await gql_push(system, token, [{"path": "blog/a.md", "content": "A2"}])
    assert again["notes"][0]["id"] == a["id"] and again["notes"][0]["version"] == 2

    # One offending update: an ErrorPayload naming each offending path; nothing written.
    payload = await gql_push(
        system,
        token,
        [
            {"path": "blog/c.md", "content": "C"},
            {"path": "other/x.md", "content": "X"},
            {"path": "blog/a.md", "content": "stale", "expectedHash": content_hash("A")},
        ],
    )
    assert payload["__typename"] == "ErrorPayload"
    assert payload["errors"] == [
        {"path": "other/x.md", "error": "path is outside the write patterns"}
    ]
    assert "other/x.md" in payload["message"]
    payload = await gql_push(
        system,
        token,
        [
            {"path": "blog/c.md", "content": "C"},
            {"path": "blog/a.md", "content": "stale", "expectedHash": content_hash("A")},
        ],
    )
    assert payload["__typename"] == "ErrorPayload"
    assert [e["path"] for e in payload["errors"]] == ["blog/a.md"]
    assert (await call(system, "GET", "/api/notes/blog/c.md", token))[0] == 404

    # Reads: note (null when absent), notePaths (only readable paths)
    _, body = await agent_graphql(system, token, NOTE, {"path": "blog/a.md"})
    note = body["data"]["note"]
    assert note["content"] == "A2" and note["depth"] == 1 and note["version"] == 2
    _, body = await agent_graphql(system, token, NOTE, {"path": "blog/none.md"})
    assert body["data"]["note"] is None
    _, body = await agent_graphql(system, token, PATHS, {"pattern": "blog/*"})
    assert [
        (p["path"], p["latestContentHash"], p["version"]) for p in body["data"]["notePaths"]
    ] == [
        ("blog/a.md", content_hash("A2"), 2),
        ("blog/b.md", content_hash("B"), 1),
    ]


async def test_reads_follow_the_token_read_patterns(system: System) -> None:
    writer = mint(system.settings)
    await push(
        system,
        writer,
        {"path": "public/a.md", "content": "a"},
        {"path": "private/b.md", "content": "b"},
    )
    reader = mint(system.settings, read=["public/*"], write=[])
    _, body = await agent_graphql(system, reader, PATHS, {})
    assert [p["path"] for p in body["data"]["notePaths"]] == ["public/a.md"]
    _, body = await agent_graphql(system, reader, NOTE, {"path": "private/b.md"})
    assert body["data"]["note"] is None
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    # and writes follow the write patterns: [] writes nothing
    payload = await gql_push(system, reader, [{"path": "public/a.md", "content": "x"}])
    assert payload["__typename"] == "ErrorPayload"


async def test_skip_commit_stages_invisibly_and_commit_applies_one_batch(system: System) -> None:
    token = mint(system.settings)
    await push(system, token, {"path": "s/existing.md", "content": "old"})
    staged = await gql_push(
        system,
        token,
        [
            {"path": "s/new.md", "content": "N", "expectedHash": ""},
            {"path": "s/existing.md", "content": "new", "expectedHash": content_hash("old")},
        ],
        skip_commit=True,
    )
    assert staged["__typename"] == "PushNotesPayload"
    assert [(n["path"], n["version"]) for n in staged["notes"]] == [
        ("s/new.md", 0),
        ("s/existing.md", 0),
    ]
    # Invisible to every reader until committed: REST, GraphQL, another token, the admin.
    assert (await call(system, "GET", "/api/notes/s/new.md", token))[0] == 404
    _, body = await agent_graphql(system, token, PATHS, {"pattern": "s/*"})
    assert [p["path"] for p in body["data"]["notePaths"]] == ["s/existing.md"]
    _, note = await call(system, "GET", "/api/notes/s/existing.md", token)
    assert note["content"] == "old"
    _, body = await system.graphql(
        system.admin,
        '{ note(path: "s/existing.md") { content } n: note(path: "s/new.md") { path } }',
    )
    assert body["data"] in ({"note": None, "n": None}, {"note": {"content": "old"}, "n": None})
    # Another token (another delivery) commits nothing of ours.
    other = mint(system.settings)
    _, body = await agent_graphql(system, other, COMMIT_NOTES)
    assert body["data"]["commitNotes"] == {"__typename": "CommitNotesPayload", "success": True}
    assert (await call(system, "GET", "/api/notes/s/new.md", token))[0] == 404
    # Staging again replaces a path's staged update.
    await gql_push(
        system, token, [{"path": "s/new.md", "content": "N2", "expectedHash": ""}], skip_commit=True
    )

    _, body = await agent_graphql(system, token, COMMIT_NOTES)
    assert body["data"]["commitNotes"] == {"__typename": "CommitNotesPayload", "success": True}
    _, note = await call(system, "GET", "/api/notes/s/new.md", token)
    assert note["content"] == "N2" and note["version"] == 1
    _, note = await call(system, "GET", "/api/notes/s/existing.md", token)
    assert note["content"] == "new" and note["version"] == 2
    new, existing = (
        await note_events(system.dsn, "s/new.md"),
        await note_events(system.dsn, "s/existing.md"),
    )
    assert new[-1]["batch_id"] == existing[-1]["batch_id"]  # one atomic batch
    # Nothing left staged: committing again writes nothing.
    _, body = await agent_graphql(system, token, COMMIT_NOTES)
    assert body["data"]["commitNotes"]["success"] is True
    assert len(await note_events(system.dsn, "s/new.md")) == 1


async def test_a_commit_with_a_conflict_writes_nothing_and_keeps_the_staged_updates(
    system: System,
) -> None:
    token = mint(system.settings)
    await push(system, token, {"path": "c/a.md", "content": "1"})
    await gql_push(
        system,
        token,
        [
            {"path": "c/b.md", "content": "B"},
            {"path": "c/a.md", "content": "2", "expectedHash": content_hash("1")},
        ],
        skip_commit=True,
    )
    await push(system, mint(system.settings), {"path": "c/a.md", "content": "someone else"})
    _, body = await agent_graphql(system, token, COMMIT_NOTES)
    payload = body["data"]["commitNotes"]
    assert payload["__typename"] == "ErrorPayload"
    assert [e["path"] for e in payload["errors"]] == ["c/a.md"]
    assert (await call(system, "GET", "/api/notes/c/b.md", token))[0] == 404
    # The agent re-stages with the current hash and commits.
    _, current = await call(system, "GET", "/api/notes/c/a.md", token)
    await gql_push(
        system,
        token,
        [{"path": "c/a.md", "content": "2", "expectedHash": current["content_hash"]}],
        skip_commit=True,
    )
    _, body = await agent_graphql(system, token, COMMIT_NOTES)
    assert body["data"]["commitNotes"]["__typename"] == "CommitNotesPayload"
    assert (await call(system, "GET", "/api/notes/c/b.md", token))[0] == 200


async def test_staged_updates_survive_a_restart_and_expire_with_the_token(
    settings: Settings,
) -> None:
    clock = ManualClock(NOW)
    token = mint(settings)
    async with running(settings, clock, ("admin-api", "importer")) as r:
        await open_webhook(r, await admin_token(settings.database_url))
        await gql_push(r, token, [{"path": "r/a.md", "content": "kept"}], skip_commit=True)
    async with running(settings, clock, ("importer",)) as r:  # a new importer process
        _, body = await agent_graphql(r, token, COMMIT_NOTES)
        assert body["data"]["commitNotes"]["success"] is True
        _, note = await call(r, "GET", "/api/notes/r/a.md", token)
        assert note["content"] == "kept"

        # Staged with a token that then expires: gone with it.
        short = mint(settings, ttl=60)
        await gql_push(r, short, [{"path": "r/late.md", "content": "x"}], skip_commit=True)
        clock.advance(timedelta(seconds=61))
        status, _ = await agent_graphql(r, short, COMMIT_NOTES)
        assert status == 401
        fresh = mint(settings, now=clock.now())
        await gql_push(r, fresh, [{"path": "r/other.md", "content": "y"}], skip_commit=True)
        conn = await asyncpg.connect(settings.database_url)
        try:
            left = await conn.fetch("select path from importer.staged_changes order by path")
        finally:
            await conn.close()
        assert [row["path"] for row in left] == ["r/other.md"]


async def test_hide_notes_is_atomic(system: System) -> None:
    token = mint(system.settings, write=["h/*"])
    await push(
        system, token, {"path": "h/a.md", "content": "a"}, {"path": "h/b.md", "content": "b"}
    )
    _, body = await agent_graphql(system, token, HIDE_NOTES, {"paths": ["h/a.md", "h/missing.md"]})
    payload = body["data"]["hideNotes"]
    assert payload["__typename"] == "ErrorPayload"
    assert payload["errors"] == [{"path": "h/missing.md", "error": "note does not exist"}]
    assert (await call(system, "GET", "/api/notes/h/a.md", token))[0] == 200
    _, body = await agent_graphql(system, token, HIDE_NOTES, {"paths": ["h/b.md", "h/a.md"]})
    assert body["data"]["hideNotes"] == {
        "__typename": "HideNotesPayload",
        "paths": ["h/b.md", "h/a.md"],
    }
    _, body = await agent_graphql(system, token, PATHS, {"pattern": "h/*"})
    assert body["data"]["notePaths"] == []
    a, b = (
        await note_events(system.dsn, "h/a.md"),
        await note_events(system.dsn, "h/b.md"),
    )
    assert a[-1]["event"] == b[-1]["event"] == "remove" and a[-1]["batch_id"] == b[-1]["batch_id"]


async def test_graphql_errors_401_and_bad_arguments(system: System) -> None:
    token = mint(system.settings)
    for bad in (
        None,
        "not-a-jwt",
        mint(system.settings, key="another-key-0123456789abcdef0123456789"),
    ):
        status, body = await agent_graphql(system, bad, PATHS, {})
        assert status == 401 and body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    _, body = await agent_graphql(system, token, PATHS, {"pattern": "../*"})
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "pattern"}
    _, body = await agent_graphql(system, token, NOTE, {"path": "/abs"})
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "path"}
    _, body = await agent_graphql(
        system, token, PUSH_NOTES, {"input": {"updates": [{"path": "a", "content": 5}]}}
    )
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "content"}
    assert not body.get("data")
    status, body = await agent_graphql(system, token, "{ notePaths { nope } }")
    assert status == 400 and body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    status, body = await call(system, "POST", "/graphql", token, raw=b"{nope")
    assert status == 400


async def test_a_narrow_listing_reads_only_what_it_may_show(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Listing filters in SQL: with 500 notes under the prefix and a token that may read
    three of them, three rows leave the database (not 500 to be filtered in Python)."""
    from cronhooks_common.clock import SystemClock
    from cronhooks_importer.agent_notes import AgentNotes
    from cronhooks_importer.callers import Caller

    await pool.execute(
        """insert into importer.notes (path, content, content_hash, version, depth, updated_at,
        updated_by) select 'n/' || i || '.md', 'x', 'h', 1, 0, now(), 'test'
        from generate_series(1, 500) as i"""
    )
    fetched: list[int] = []

    class Counting:
        async def fetch(self, *args: Any) -> list[asyncpg.Record]:
            rows = await pool.fetch(*args)
            fetched.append(len(rows))
            return rows

    caller = Caller(
        subject="webhook:1",
        delivery_id=None,
        depth=1,
        max_depth=1,
        read_patterns=(("n/1*.md", "n/2.md"), ("n/1.md", "n/10.md", "n/2.md", "n/3.md")),
        write_patterns=(),
        stage_owner="t",
        expires_at=None,
    )
    notes = AgentNotes(pool=Counting(), clock=SystemClock())  # type: ignore[arg-type]
    rows = await notes.readable(caller, "n/*")
    assert [r["path"] for r in rows] == ["n/1.md", "n/10.md", "n/2.md"]
    assert fetched == [3]
