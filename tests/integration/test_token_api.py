"""The agent token API (CONTRACT §5) and the note store, on the running services."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from cronhooks_importer.rules import MAX_NOTE_BYTES, content_hash
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, finished, retry_due, trigger
from tests.support.graphql import UPDATE_WEBHOOK
from tests.support.inprocess import Running, eventually
from tests.support.system import System
from tests.support.token_api import NOW, call, mint, push

pytestmark = pytest.mark.system(start=NOW, open_webhook=True)


async def test_push_read_list_and_update(system: System) -> None:
    token = mint(system.settings, read=["digests/*"], write=["digests/*"])
    status, body = await push(
        system,
        token,
        {"path": "digests/a.md", "content": "A", "expected_hash": ""},
        {"path": "digests/b/c.md", "content": "C"},
    )
    assert status == 200
    assert body == {
        "applied": [
            {"path": "digests/a.md", "content_hash": content_hash("A"), "version": 1},
            {"path": "digests/b/c.md", "content_hash": content_hash("C"), "version": 1},
        ]
    }
    status, note = await call(system, "GET", "/api/notes/digests/b/c.md", token)
    assert status == 200 and note["content"] == "C" and note["depth"] == 1 and note["version"] == 1
    status, note = await call(system, "GET", "/api/notes/digests%2Fb%2Fc.md", token)
    assert status == 200 and note["path"] == "digests/b/c.md"
    status, listing = await call(system, "GET", "/api/notes?pattern=digests/*", token)
    assert [n["path"] for n in listing["notes"]] == ["digests/a.md", "digests/b/c.md"]
    assert set(listing["notes"][0]) == {"path", "content_hash", "version", "updated_at"}
    status, body = await push(
        system, token, {"path": "digests/a.md", "content": "A2", "expected_hash": content_hash("A")}
    )
    assert status == 200 and body["applied"][0]["version"] == 2


async def test_status_codes(system: System) -> None:
    token = mint(system.settings, read=["public/*"], write=["public/*"])
    assert (await push(system, token, {"path": "public/x", "content": "x"}))[0] == 200
    # 401: missing, forged, expired, another audience or issuer
    assert (await call(system, "GET", "/api/notes"))[0] == 401
    forged = mint(system.settings, key="another-key-0123456789abcdef0123456789")
    assert (await call(system, "GET", "/api/notes", forged))[0] == 401
    expired = mint(system.settings, now=NOW - timedelta(hours=2))
    status, body = await call(system, "GET", "/api/notes", expired)
    assert status == 401 and "expired" in body["error"]
    import jwt as pyjwt

    claims = pyjwt.decode(token, options={"verify_signature": False})
    from cronhooks_common.crypto import derive_key

    other_aud = pyjwt.encode(
        {**claims, "aud": "someone-else"},
        derive_key(system.settings.secret_key, "api-token/v1"),
        algorithm="HS256",
    )
    assert (await call(system, "GET", "/api/notes", other_aud))[0] == 401
    other_iss = mint(system.settings, issuer="http://evil.example")
    assert (await call(system, "GET", "/api/notes", other_iss))[0] == 401
    assert (await call(system, "GET", "/api/notes", "not-a-jwt"))[0] == 401
    # 403: reading or writing outside the patterns
    status, body = await call(system, "GET", "/api/notes/private/x", token)
    assert status == 403 and "read_patterns" in body["error"]
    status, body = await push(system, token, {"path": "private/x", "content": "x"})
    assert status == 403 and body["errors"] == [
        {"path": "private/x", "error": "path is outside the write patterns"}
    ]
    # 404
    assert (await call(system, "GET", "/api/notes/public/none", token))[0] == 404
    # 409 with one error per conflicting change
    status, body = await push(
        system, token, {"path": "public/x", "content": "y", "expected_hash": ""}
    )
    assert status == 409 and body["errors"][0]["path"] == "public/x"
    assert "already exists" in body["errors"][0]["error"]
    # 400: not JSON, not the right shape, a bad path
    assert (await call(system, "POST", "/api/notes", token, raw=b"{nope"))[0] == 400
    assert (await call(system, "POST", "/api/notes", token, body={"notes": []}))[0] == 400
    status, body = await push(system, token, {"path": "public/../etc", "content": "x"})
    assert status == 400 and ".." in body["errors"][0]["error"]
    # 413: a note over 1 MiB, and a request body over the limit
    status, body = await push(
        system, token, {"path": "public/big", "content": "x" * (MAX_NOTE_BYTES + 1)}
    )
    assert status == 413 and "larger than" in body["errors"][0]["error"]
    status, _ = await call(system, "POST", "/api/notes", token, raw=b"x" * (33 << 20))
    assert status == 413


async def test_a_token_deeper_than_max_depth_cannot_write(system: System) -> None:
    token = mint(system.settings, depth=3, max_depth=2)
    status, body = await push(system, token, {"path": "a", "content": "x"})
    assert status == 403 and body["error"] == "depth 3 exceeds the webhook's maxDepth 2"
    assert (await call(system, "GET", "/api/notes", token))[0] == 200  # reading is fine
    ok = mint(system.settings, depth=2, max_depth=2)
    assert (await push(system, ok, {"path": "a", "content": "x"}))[0] == 200
    status, note = await call(system, "GET", "/api/notes/a", ok)
    assert note["depth"] == 2


async def test_one_bad_change_in_ten_writes_nothing(system: System) -> None:
    token = mint(system.settings, write=["ok/*"])
    changes = [{"path": f"ok/{i}", "content": str(i)} for i in range(9)]
    changes.insert(5, {"path": "ok/../escape", "content": "x"})
    status, body = await push(system, token, *changes)
    assert status == 400 and len(body["errors"]) == 1
    # a hash conflict in the last change also rolls back the nine before it
    await push(system, token, {"path": "ok/existing", "content": "e"})
    changes = [{"path": f"ok/{i}", "content": str(i)} for i in range(9)]
    changes.append({"path": "ok/existing", "content": "e2", "expected_hash": "0" * 64})
    status, body = await push(system, token, *changes)
    assert status == 409 and [e["path"] for e in body["errors"]] == ["ok/existing"]
    _, listing = await call(system, "GET", "/api/notes?pattern=ok/*", token)
    assert [n["path"] for n in listing["notes"]] == ["ok/existing"]


async def test_concurrent_pushes_with_one_expected_hash_one_wins(system: System) -> None:
    token = mint(system.settings)
    await push(system, token, {"path": "race.md", "content": "v1"})
    expected = content_hash("v1")
    results = await asyncio.gather(
        *(
            push(
                system,
                token,
                {"path": "race.md", "content": f"writer {i}", "expected_hash": expected},
            )
            for i in range(10)
        )
    )
    statuses = sorted(s for s, _ in results)
    assert statuses == [200] + [409] * 9
    # Creators of a new path race too.
    results = await asyncio.gather(
        *(
            push(system, token, {"path": "new.md", "content": f"{i}", "expected_hash": ""})
            for i in range(10)
        )
    )
    assert sorted(s for s, _ in results) == [200] + [409] * 9
    _, note = await call(system, "GET", "/api/notes/race.md", token)
    assert note["version"] == 2


async def note_over_graphql(r: Running, token: str, path: str) -> dict | None:  # type: ignore[type-arg]
    _, body = await r.graphql(
        token,
        """query($p: String!) { note(path: $p) {
        path contentHash version depth updatedAt updatedBy } }""",
        {"p": path},
    )
    return body["data"]["note"]  # type: ignore[no-any-return]


async def test_async_loop_202_then_push_with_the_api_token(system: System, agent: Agent) -> None:
    got: list[Received] = []

    async def accept(_: web.Request, entry: Received) -> web.StreamResponse:
        got.append(entry)
        return web.json_response({"status": "accepted"}, status=202)

    hook_id, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("async", accept),
        passApiKey=True,
        writePatterns=["reports/*"],
    )
    d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    assert d["status"] == "success"
    body = got[0].body
    # The agent works later and pushes through the token API at api_url.
    assert body["api_url"] == system.settings.api_public_url
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{system.urls['importer']}/api/notes",
            headers={"Authorization": f"Bearer {body['api_token']}"},
            json={
                "changes": [
                    {"path": "reports/weekly.md", "content": "# Weekly", "expected_hash": ""}
                ]
            },
        ) as resp,
    ):
        assert resp.status == 200
    note = await eventually(lambda: note_over_graphql(system, system.admin, "reports/weekly.md"))
    assert note["depth"] == 1 and note["version"] == 1
    assert note["contentHash"] == content_hash("# Weekly")
    assert note["updatedBy"] == f"webhook:{hook_id} delivery:{d['id']}"


async def test_sync_loop_notes_visible_over_graphql_and_conflicts_name_the_path(
    system: System,
    agent: Agent,
) -> None:
    answer = {
        "status": "ok",
        "changes": [{"path": "digests/today.md", "content": "# Today", "expected_hash": ""}],
    }

    async def answer_changes(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response(answer)

    hook_id, _ = await create_webhook(
        system,
        system.admin,
        agent.url_for("sync", answer_changes),
        writePatterns=["digests/*"],
        maxRetries=1,
    )
    assert (await finished(system, system.admin, await trigger(system, system.admin, hook_id)))[
        "status"
    ] == "success"
    note = await eventually(lambda: note_over_graphql(system, system.admin, "digests/today.md"))
    assert note["depth"] == 1 and note["version"] == 1
    _, listing = await system.graphql(
        system.admin, '{ notes(pattern: "digests/*") { path version } }'
    )
    assert listing["data"]["notes"] == [{"path": "digests/today.md", "version": 1}]
    # The same answer again: the note exists, expected_hash "" conflicts, the attempt
    # fails and the retry's previous_error names the path.
    delivery_id = await trigger(system, system.admin, hook_id)
    await eventually(lambda: retry_due(system.dsn, delivery_id))
    system.clock.advance(timedelta(seconds=10))
    await finished(system, system.admin, delivery_id)
    retry = agent.at("sync")[-1].body
    assert retry["attempt"] == 2
    assert "digests/today.md: note already exists" in retry["previous_error"]


async def test_notes_are_the_store_of_truth_in_postgres(system: System) -> None:
    await push(system, mint(system.settings), {"path": "h.md", "content": "hash me"})
    conn = await asyncpg.connect(system.dsn)
    try:
        row = await conn.fetchrow(
            "select content_hash, version from importer.notes where path = 'h.md'"
        )
        events = await conn.fetch(
            "select type, version from eventstore.events where stream = 'note-h.md'"
        )
    finally:
        await conn.close()
    assert row["content_hash"] == content_hash("hash me") and row["version"] == 1
    assert [(e["type"], e["version"]) for e in events] == [("note.changed", 1)]


async def test_a_token_follows_its_webhooks_current_state(system: System) -> None:
    """CONTRACT §15: honoured only while the webhook exists and is enabled; reads and writes
    only what both the token's and the webhook's current patterns allow — at once, without
    waiting for the token to expire."""
    hook_id, _ = await create_webhook(
        system, system.admin, "https://agent.example/hook", readPatterns=["*"], writePatterns=["*"]
    )
    token = mint(system.settings, webhook_id=hook_id, read=["*"], write=["*"])
    assert (
        await push(
            system, token, {"path": "a/x.md", "content": "1"}, {"path": "b/y.md", "content": "2"}
        )
    )[0] == 200

    async def update(**fields: Any) -> None:
        _, body = await system.graphql(
            system.admin, UPDATE_WEBHOOK, {"input": {"id": hook_id, **fields}}
        )
        assert "errors" not in body, body

    await update(writePatterns=["a/*"], readPatterns=["a/*"])
    status, body = await push(system, token, {"path": "b/y.md", "content": "3"})
    assert status == 403 and body["errors"][0]["path"] == "b/y.md"
    assert (await push(system, token, {"path": "a/x.md", "content": "3"}))[0] == 200
    _, listing = await call(system, "GET", "/api/notes?pattern=*", token)
    assert [n["path"] for n in listing["notes"]] == ["a/x.md"]
    assert (await call(system, "GET", "/api/notes/b/y.md", token))[0] == 403

    await update(writePatterns=[])
    assert (await push(system, token, {"path": "a/x.md", "content": "4"}))[0] == 403

    await update(enabled=False)  # paused: its tokens are not honoured
    status, body = await call(system, "GET", "/api/notes/a/x.md", token)
    assert status == 401 and "revoked" in body["error"]
    await update(enabled=True, writePatterns=["*"])
    assert (await push(system, token, {"path": "a/x.md", "content": "5"}))[0] == 200

    _, body = await system.graphql(
        system.admin, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}"
    )
    assert "errors" not in body
    assert (await push(system, token, {"path": "a/x.md", "content": "6"}))[0] == 401
    status, body = await call(
        system, "POST", "/graphql", token, {"query": "{ notePaths { path } }"}
    )
    assert status == 401
    # A token for a webhook that never existed is no token either.
    assert (await call(system, "GET", "/api/notes", mint(system.settings, webhook_id=999)))[
        0
    ] == 401


async def test_the_webhooks_current_max_depth_bounds_its_tokens(system: System) -> None:
    hook_id, _ = await create_webhook(
        system, system.admin, "https://agent.example/hook", writePatterns=["*"], maxDepth=3
    )
    token = mint(system.settings, webhook_id=hook_id, depth=3, max_depth=3)
    assert (await push(system, token, {"path": "d.md", "content": "1"}))[0] == 200
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook_id, "maxDepth": 2}}
    )
    assert "errors" not in body
    status, body = await push(system, token, {"path": "d.md", "content": "2"})
    assert status == 403 and "maxDepth 2" in body["error"]
