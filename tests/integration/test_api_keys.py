"""API keys (CONTRACT §5): created by an admin and shown once, stored hashed, sent as
`X-API-Key` to the importer's REST and GraphQL routes, writing every path at depth 0;
`skipWebhooks` keys mark their batches as firing no change webhook; a revoked or unknown
key is refused at once."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.support.flows import create_api_key, events_of
from tests.support.graphql import COMMIT_NOTES, CREATE_API_KEY, HIDE_NOTES, PUSH_NOTES
from tests.support.inprocess import Running
from tests.support.system import System
from tests.support.token_api import NOW, call, mint, open_webhook

REVOKE = """mutation($id: Int!) { revokeApiKey(id: $id) {
  apiKey { id name revokedAt } } }"""
LIST = "{ apiKeys { id name skipWebhooks createdAt revokedAt } }"


pytestmark = pytest.mark.system(start=NOW)


async def with_key(
    r: Running, key: str, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    return await call(r, method, path, body=body, headers={"X-API-Key": key})


async def test_a_key_is_shown_once_stored_hashed_and_listed_without_it(system: System) -> None:
    api_key, key = await create_api_key(system, system.admin, "linter", skipWebhooks=True)
    assert key.startswith("chk_") and len(key) > 40
    assert api_key["name"] == "linter" and api_key["skipWebhooks"] is True
    assert api_key["revokedAt"] is None and api_key["createdBy"].endswith(":test")
    status, body = await system.graphql(system.admin, LIST)
    assert status == 200 and body["data"]["apiKeys"] == [
        {k: api_key[k] for k in ("id", "name", "skipWebhooks", "createdAt", "revokedAt")}
    ]
    conn = await asyncpg.connect(system.dsn)
    try:
        stored = await conn.fetch("select * from shared.api_keys")
        events = await conn.fetch("select data::text as data from eventstore.events")
    finally:
        await conn.close()
    assert len(stored) == 1 and key not in str(dict(stored[0]))
    assert all(key not in e["data"] for e in events)
    [created] = [e for e in await events_of(system.dsn, f"api_key-{api_key['id']}")]
    assert created["type"] == "api_key.created"
    assert created["data"] == {"api_key_id": api_key["id"], "name": "linter", "skip_webhooks": True}


async def test_a_key_reads_and_writes_every_path_at_depth_0_over_rest_and_graphql(
    system: System,
) -> None:
    api_key, key = await create_api_key(system, system.admin, "editor")
    status, body = await with_key(
        system, key, "POST", "/api/notes", {"changes": [{"path": "blog/post.md", "content": "v1"}]}
    )
    assert status == 200 and body["applied"][0]["version"] == 1, body
    status, body = await with_key(
        system,
        key,
        "POST",
        "/graphql",
        {
            "query": PUSH_NOTES,
            "variables": {"input": {"updates": [{"path": "x/y/z.md", "content": "a"}]}},
        },
    )
    assert status == 200 and body["data"]["pushNotes"]["__typename"] == "PushNotesPayload", body
    status, note = await with_key(system, key, "GET", "/api/notes/blog/post.md")
    assert status == 200 and note["depth"] == 0 and note["content"] == "v1"
    status, listed = await with_key(system, key, "GET", "/api/notes?pattern=*")
    assert status == 200 and [n["path"] for n in listed["notes"]] == ["blog/post.md", "x/y/z.md"]
    status, removed = await with_key(system, key, "DELETE", "/api/notes/x/y/z.md")
    assert status == 200 and removed["removed"]["version"] == 2
    changed = [e["data"] for e in await events_of(system.dsn, "note-blog/post.md")]
    assert changed[0]["depth"] == 0 and changed[0]["skip_webhooks"] is False
    assert changed[0]["writer"] == f"api_key:{api_key['id']}:editor"


async def test_a_skip_webhooks_key_marks_its_batches(system: System) -> None:
    _, key = await create_api_key(system, system.admin, "linter", skipWebhooks=True)
    status, _ = await with_key(
        system, key, "POST", "/api/notes", {"changes": [{"path": "a.md", "content": "x"}]}
    )
    assert status == 200
    [changed] = [e["data"] for e in await events_of(system.dsn, "note-a.md")]
    assert changed["skip_webhooks"] is True and changed["depth"] == 0


async def test_a_revoked_or_unknown_key_is_refused_at_once(system: System) -> None:
    api_key, key = await create_api_key(system, system.admin, "temporary")
    assert (await with_key(system, key, "GET", "/api/notes?pattern=*"))[0] == 200
    status, body = await system.graphql(system.admin, REVOKE, {"id": api_key["id"]})
    assert status == 200 and body["data"]["revokeApiKey"]["apiKey"]["revokedAt"] is not None
    for method, path, payload in (
        ("GET", "/api/notes?pattern=*", None),
        ("POST", "/api/notes", {"changes": [{"path": "a.md", "content": "x"}]}),
        ("POST", "/graphql", {"query": "{ notePaths { path } }"}),
    ):
        assert (await with_key(system, key, method, path, payload))[0] == 401, path
    assert (await with_key(system, "chk_never-issued", "GET", "/api/notes?pattern=*"))[0] == 401
    # Revoking again changes nothing; an unknown id is NOT_FOUND.
    status, again = await system.graphql(system.admin, REVOKE, {"id": api_key["id"]})
    assert again["data"]["revokeApiKey"]["apiKey"] == body["data"]["revokeApiKey"]["apiKey"]
    types = [e["type"] for e in await events_of(system.dsn, f"api_key-{api_key['id']}")]
    assert types == ["api_key.created", "api_key.revoked"]
    status, missing = await system.graphql(system.admin, REVOKE, {"id": 999})
    assert missing["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_both_credentials_at_once_are_refused(system: System) -> None:
    await open_webhook(system, system.admin)
    _, key = await create_api_key(system, system.admin, "k")
    status, body = await call(
        system,
        "GET",
        "/api/notes?pattern=*",
        mint(system.settings),
        headers={"X-API-Key": key},
    )
    assert status == 401 and "one credential" in str(body)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("x" * 201, "at most 200"),
        ("a\x07b", "control characters"),
    ],
)
async def test_a_bad_name_is_refused_naming_the_field_and_creates_nothing(
    system: System,
    name: str,
    reason: str,
) -> None:
    _, body = await system.graphql(system.admin, CREATE_API_KEY, {"input": {"name": name}})
    [error] = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "name"}
    assert reason in error["message"]
    _status, body = await system.graphql(system.admin, LIST)
    assert body["data"]["apiKeys"] == []


# --- admin note writes (CONTRACT §8): the importer's code path, at depth 0 ----------------

NOTE = "query($path: String!) { note(path: $path) { content version depth updatedBy } }"


async def test_an_admin_writes_and_hides_notes_at_depth_0_under_its_name(system: System) -> None:
    update = {"path": "blog/post.md", "content": "# Post"}
    status, body = await system.graphql(system.admin, PUSH_NOTES, {"input": {"updates": [update]}})
    assert status == 200 and "errors" not in body, body
    pushed = body["data"]["pushNotes"]
    assert pushed["__typename"] == "PushNotesPayload"
    [note] = pushed["notes"]
    assert note["path"] == "blog/post.md" and note["version"] == 1 and note["assets"] == []
    status, body = await system.graphql(system.admin, NOTE, {"path": "blog/post.md"})
    got = body["data"]["note"]
    assert got["content"] == "# Post" and got["depth"] == 0 and got["updatedBy"].endswith(":test")
    [changed] = [e for e in await events_of(system.dsn, "note-blog/post.md")]
    assert changed["data"]["depth"] == 0 and changed["data"]["writer"].startswith("admin:")
    assert changed["data"]["writer"].endswith(":test") and changed["data"]["skip_webhooks"] is False

    # A stale hash is the agent API's ErrorPayload; nothing is written.
    stale = {**update, "content": "x", "expectedHash": ""}
    status, body = await system.graphql(system.admin, PUSH_NOTES, {"input": {"updates": [stale]}})
    refused = body["data"]["pushNotes"]
    assert (
        refused["__typename"] == "ErrorPayload" and refused["errors"][0]["path"] == "blog/post.md"
    )

    # Staged, invisible, then committed as one batch.
    staged = {"path": "drafts/a.md", "content": "draft"}
    status, body = await system.graphql(
        system.admin, PUSH_NOTES, {"input": {"updates": [staged], "skipCommit": True}}
    )
    assert body["data"]["pushNotes"]["notes"][0]["version"] == 0
    assert (await system.graphql(system.admin, NOTE, {"path": "drafts/a.md"}))[1]["data"][
        "note"
    ] is None
    status, body = await system.graphql(system.admin, COMMIT_NOTES)
    assert body["data"]["commitNotes"] == {"__typename": "CommitNotesPayload", "success": True}
    assert (await system.graphql(system.admin, NOTE, {"path": "drafts/a.md"}))[1]["data"]["note"][
        "version"
    ] == 1

    status, body = await system.graphql(system.admin, HIDE_NOTES, {"paths": ["blog/post.md"]})
    assert body["data"]["hideNotes"] == {
        "__typename": "HideNotesPayload",
        "paths": ["blog/post.md"],
    }
    assert (await system.graphql(system.admin, NOTE, {"path": "blog/post.md"}))[1]["data"][
        "note"
    ] is None
    status, body = await system.graphql(system.admin, HIDE_NOTES, {"paths": ["../etc/passwd"]})
    assert body["data"]["hideNotes"]["__typename"] == "ErrorPayload"


async def test_an_admin_write_token_is_refused_anywhere_but_where_it_belongs(
    system: System,
) -> None:
    """The token admin-api mints for a forwarded write is not an api_token: a forged one, one
    signed with another key or expired, is 401; and an api_token is not an admin token."""
    from cronhooks_common.tokens import AdminWriteTokens

    forged = AdminWriteTokens(
        master_key="another-key-" + "x" * 32, issuer=system.settings.public_url
    )
    for token in (
        forged.mint(actor="admin:1:evil", now=NOW),
        AdminWriteTokens(
            master_key=system.settings.secret_key, issuer=system.settings.public_url
        ).mint(actor="admin:1:late", now=NOW.replace(year=NOW.year - 1)),
        AdminWriteTokens(
            master_key=system.settings.secret_key, issuer=system.settings.public_url
        ).mint(actor="webhook:1", now=NOW),
    ):
        status, _ = await call(
            system, "POST", "/api/notes", token, {"changes": [{"path": "a.md", "content": "x"}]}
        )
        assert status == 401
