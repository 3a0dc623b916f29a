"""`commitNotes` applies what was staged as a batch under the same rules as a push
(CONTRACT §15, revision 3): the webhook's *current* write patterns, at most 1,000 changes
and 2 MiB. A refused commit writes nothing (no note, no `note.changed`) and keeps the
staged updates, so the agent can fix them and commit again. And (§5) a path appears at most
once in any batch: only its second and later changes get the error."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from cronhooks_common.settings import Settings
from cronhooks_importer.rules import MAX_NOTE_BYTES
from tests.support.flows import create_webhook
from tests.support.graphql import COMMIT_NOTES, HIDE_NOTES, PUSH_NOTES, UPDATE_WEBHOOK
from tests.support.inprocess import Running
from tests.support.system import System
from tests.support.token_api import NOW, agent_graphql, mint, push

TWICE = "path appears twice in the batch"


pytestmark = pytest.mark.system(services=("admin-api", "importer"), start=NOW, open_webhook=True)


async def push_notes(
    r: Running, token: str, updates: list[dict[str, Any]], *, stage: bool = False
) -> dict[str, Any]:
    status, body = await agent_graphql(
        r, token, PUSH_NOTES, {"input": {"updates": updates, "skipCommit": stage}}
    )
    assert status == 200 and "errors" not in body, body
    return body["data"]["pushNotes"]  # type: ignore[no-any-return]


async def stage(r: Running, token: str, updates: list[dict[str, Any]]) -> None:
    payload = await push_notes(r, token, updates, stage=True)
    assert payload["__typename"] == "PushNotesPayload", payload


async def commit(r: Running, token: str) -> dict[str, Any]:
    status, body = await agent_graphql(r, token, COMMIT_NOTES)
    assert status == 200 and "errors" not in body, body
    return body["data"]["commitNotes"]  # type: ignore[no-any-return]


async def store(settings: Settings) -> tuple[list[str], int, int]:
    """(visible note paths, note.changed events, staged updates): what a commit left."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        paths = await conn.fetch("select path from importer.notes where not removed order by 1")
        changed = await conn.fetchval(
            "select count(*) from eventstore.events where type = 'note.changed'"
        )
        staged = await conn.fetchval("select count(*) from importer.staged_changes")
    finally:
        await conn.close()
    return [p["path"] for p in paths], changed, staged


def many(prefix: str, count: int) -> list[dict[str, Any]]:
    return [{"path": f"{prefix}/{i}.md", "content": f"note {i}"} for i in range(count)]


# --- finding 3: the webhook's current patterns ------------------------------------------------


async def test_a_commit_refuses_staged_paths_the_webhooks_narrowed_write_patterns_exclude(
    system: System,
) -> None:
    hook_id, _ = await create_webhook(
        system, system.admin, "https://agent.example/hook", readPatterns=["*"], writePatterns=["*"]
    )
    token = mint(system.settings, webhook_id=hook_id)
    await stage(system, token, [{"path": "w2/a", "content": "A"}, {"path": "z/b", "content": "B"}])

    async def write_patterns(patterns: list[str]) -> None:
        _, body = await system.graphql(
            system.admin, UPDATE_WEBHOOK, {"input": {"id": hook_id, "writePatterns": patterns}}
        )
        assert "errors" not in body, body

    await write_patterns(["z/*"])
    status, body = await push(system, token, {"path": "w2/a", "content": "A"})
    assert status == 403
    [refused] = body["errors"]  # what a direct push answers, word for word

    payload = await commit(system, token)
    assert payload["__typename"] == "ErrorPayload", payload
    assert payload["errors"] == [refused] == [{"path": "w2/a", "error": refused["error"]}]
    assert "w2/a" in payload["message"] and "nothing written" in payload["message"]
    assert await store(system.settings) == ([], 0, 2)  # not even z/b; both stay staged

    # The admin widens the patterns again: the same staged updates commit, as one batch.
    await write_patterns(["*"])
    assert await commit(system, token) == {"__typename": "CommitNotesPayload", "success": True}
    assert await store(system.settings) == (["w2/a", "z/b"], 2, 0)


# --- finding 4: at most 1,000 changes and 2 MiB -----------------------------------------------


async def test_a_commit_of_more_than_1000_staged_changes_is_refused_naming_the_limit(
    system: System,
) -> None:
    token = mint(system.settings)
    for n in range(3):  # each push is within the limits; together they are 3,000 changes
        await stage(system, token, many(f"b{n}", 1000))

    payload = await commit(system, token)
    assert payload["__typename"] == "ErrorPayload", payload
    assert "at most 1,000 changes in a batch" in payload["message"]
    assert [e["path"] for e in payload["errors"]] == [""]
    assert await store(system.settings) == ([], 0, 3000)

    # 1,000 staged in two pushes is a batch within the limit: it commits.
    within = mint(system.settings)
    await stage(system, within, many("ok", 600))
    await stage(system, within, many("ok", 1000)[600:])
    assert await commit(system, within) == {"__typename": "CommitNotesPayload", "success": True}
    paths, changed, staged = await store(system.settings)
    assert (len(paths), changed, staged) == (1000, 1000, 3000)


async def test_a_commit_of_more_than_2_mib_of_staged_content_is_refused_naming_the_limit(
    system: System,
) -> None:
    token = mint(system.settings)
    big = "x" * MAX_NOTE_BYTES  # 1 MiB, the most one note may hold
    await stage(system, token, [{"path": "m/1.md", "content": big}])
    await stage(system, token, [{"path": "m/2.md", "content": big}])
    await stage(system, token, [{"path": "m/3.md", "content": "!"}])  # 2 MiB + 1 byte in all

    payload = await commit(system, token)
    assert payload["__typename"] == "ErrorPayload", payload
    assert "2 MiB" in payload["message"]
    assert await store(system.settings) == ([], 0, 3)

    # The agent fixes what it staged (a path staged again replaces its update): 2 MiB commits.
    await stage(system, token, [{"path": "m/3.md", "content": ""}])
    assert await commit(system, token) == {"__typename": "CommitNotesPayload", "success": True}
    assert await store(system.settings) == (["m/1.md", "m/2.md", "m/3.md"], 3, 0)


async def test_an_admins_commit_has_the_same_bounds(system: System) -> None:
    """Admin note writes (admin-api's pushNotes/commitNotes) go through the importer's
    agent API: what an admin staged commits under the same limits."""
    admin_push = """mutation($input: PushNotesInput!) { pushNotes(input: $input) { __typename } }"""
    for part in range(2):
        _, body = await system.graphql(
            system.admin,
            admin_push,
            {"input": {"updates": many(f"a{part}", 600), "skipCommit": True}},
        )
        assert body["data"]["pushNotes"] == {"__typename": "PushNotesPayload"}, body
    _, body = await system.graphql(system.admin, COMMIT_NOTES)
    payload = body["data"]["commitNotes"]
    assert payload["__typename"] == "ErrorPayload", body
    assert "at most 1,000 changes in a batch" in payload["message"]
    assert await store(system.settings) == ([], 0, 1200)


# --- §5: a path appears at most once in any batch ---------------------------------------------


async def test_a_path_twice_in_any_batch_flags_its_second_and_later_changes(
    system: System,
) -> None:
    token = mint(system.settings)
    thrice = [{"path": "t/a.md", "content": str(n)} for n in range(3)]
    flagged = [{"path": "t/a.md", "error": TWICE}] * 2

    status, body = await push(system, token, *thrice, {"path": "t/b.md", "content": "b"})
    assert status == 400 and body["errors"] == flagged
    for staged in (False, True):  # pushNotes, and staging with skipCommit
        payload = await push_notes(system, token, thrice, stage=staged)
        assert payload["__typename"] == "ErrorPayload" and payload["errors"] == flagged
    assert await store(system.settings) == ([], 0, 0)

    await push(system, token, {"path": "t/a.md", "content": "a"})
    _, body = await agent_graphql(system, token, HIDE_NOTES, {"paths": ["t/a.md", "t/a.md"]})
    assert body["data"]["hideNotes"]["errors"] == [{"path": "t/a.md", "error": TWICE}]
    assert await store(system.settings) == (["t/a.md"], 1, 0)
