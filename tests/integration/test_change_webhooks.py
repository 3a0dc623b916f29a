"""Change webhooks (CONTRACT §11) on the running services, with real agents on loopback:
the GraphQL surface, matching (patterns, `on*` filters, batching, depth, skipWebhooks), the
§11 body, and the seed's chain with its depth guard."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.flows import create_api_key, create_change_webhook, finished, push_notes
from tests.support.graphql import (
    CREATE_CHANGE_WEBHOOK,
    CREATE_WEBHOOK,
    HIDE_NOTES,
    UPDATE_CHANGE_WEBHOOK,
)
from tests.support.inprocess import admin_token, eventually, running
from tests.support.system import System

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


async def quiet(agent: Agent, seconds: float = 1.5) -> int:
    """How many requests the agent has, once none arrived for `seconds`."""
    count = -1
    while count != len(agent.received):
        count = len(agent.received)
        await asyncio.sleep(seconds)
    return count


def answer_with(*changes: dict[str, Any]):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response({"status": "ok", "changes": list(changes)})

    return respond


def answer_anew(path: str, content: str):  # type: ignore[no-untyped-def]
    """An agent that writes `path` anew each time (its content names the delivery): the
    same content again would be a no-op write, which fires nothing (CONTRACT §16.1)."""

    async def respond(_: web.Request, got: Received) -> web.StreamResponse:
        change = {"path": path, "content": f"{content} ({got.body['id']})"}
        return web.json_response({"status": "ok", "changes": [change]})

    return respond


async def test_the_surface_creates_lists_updates_and_deletes_with_the_cron_rules(
    system: System,
) -> None:
    hook_id, secret = await create_change_webhook(
        system, system.admin, system.agent.url, includePatterns=["blog/**"]
    )
    assert secret.startswith("whsec_")
    _, body = await system.graphql(system.admin, "{ changeWebhooks { id } cronWebhooks { id } }")
    assert body["data"] == {"changeWebhooks": [{"id": hook_id}], "cronWebhooks": []}
    _, body = await system.graphql(
        system.admin, f"{{ changeWebhook(id: {hook_id}) {{ onCreate maxDepth }} }}"
    )
    assert body["data"]["changeWebhook"] == {"onCreate": True, "maxDepth": 1}
    # One id space: the cron API does not know it, and the other way round.
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook_id}) {{ id }} }}")
    assert body["data"]["cronWebhook"] is None
    _, body = await system.graphql(
        system.admin, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}"
    )
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    _, body = await system.graphql(
        system.admin,
        UPDATE_CHANGE_WEBHOOK,
        {"input": {"id": hook_id, "includePatterns": ["docs/*"], "maxDepth": 0}},
    )
    assert body["data"]["updateChangeWebhook"]["changeWebhook"] == {
        "id": hook_id,
        "includePatterns": ["docs/*"],
        "enabled": True,
        "maxDepth": 0,
    }
    _, body = await system.graphql(
        system.admin,
        f"mutation {{ regenerateChangeWebhookSecret(id: {hook_id}) {{ secret changeWebhook {{ id }} }} }}",
    )
    assert body["data"]["regenerateChangeWebhookSecret"]["secret"] != secret
    _, body = await system.graphql(
        system.admin, f"mutation {{ deleteChangeWebhook(id: {hook_id}) {{ id }} }}"
    )
    assert body["data"]["deleteChangeWebhook"] == {"id": hook_id}
    _, body = await system.graphql(system.admin, "{ changeWebhooks { id } }")
    assert body["data"]["changeWebhooks"] == []


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"includePatterns": []}, "includePatterns", "at least one pattern"),
        ({"includePatterns": ["/abs"]}, "includePatterns", "relative"),
        ({"includePatterns": ["*"], "excludePatterns": ["a/../b"]}, "excludePatterns", ".."),
        ({"includePatterns": ["*"], "maxDepth": -1}, "maxDepth", "from 0 to 100"),
        ({"includePatterns": ["*"], "timeoutSeconds": 0}, "timeoutSeconds", "from 1 to 900"),
        ({"includePatterns": ["*"], "url": "ftp://x"}, "url", "scheme"),
    ],
)
async def test_bad_input_names_the_field_and_creates_nothing(
    system: System, fields: dict[str, Any], field: str, reason: str
) -> None:
    _, body = await system.graphql(
        system.admin, CREATE_CHANGE_WEBHOOK, {"input": {"url": system.agent.url, **fields}}
    )
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and error["extensions"]["field"] == field
    assert reason in error["message"]
    _, body = await system.graphql(system.admin, "{ changeWebhooks { id } }")
    assert body["data"]["changeWebhooks"] == []


async def test_one_delivery_per_batch_with_the_matching_changes_sorted_and_signed(
    system: System,
) -> None:
    hook_id, secret = await create_change_webhook(
        system,
        system.admin,
        system.agent.url,
        includePatterns=["blog/*"],
        instruction="Check spelling",
    )
    notes = [(f"blog/{n}.md", f"post {n}") for n in "gcaefbd"] + [
        ("docs/x.md", "x"),
        ("notes/y.md", "y"),
        ("z.md", "z"),
    ]
    await push_notes(system, system.admin, *notes)
    [got] = await system.agent.wait_for(1)
    assert await quiet(system.agent) == 1
    body = Webhook(secret).verify(got.raw, got.headers)
    assert body["kind"] == "change" and body["trigger"] == "change" and body["depth"] == 0
    assert body["webhook_id"] == hook_id and body["attempt"] == 1
    assert body["instruction"] == "Check spelling" and "response_schema" in body
    assert "scheduled_for" not in body and "api_token" not in body
    assert [c["path"] for c in body["changes"]] == [f"blog/{n}.md" for n in "abcdefg"]
    first = body["changes"][0]
    assert first["event"] == "create" and first["version"] == 1
    assert first["content"] == "post a" and len(first["content_hash"]) == 64
    delivery = await finished(system, system.admin, body["id"])
    assert delivery["status"] == "success" and delivery["trigger"] == "CHANGE"
    _, listed = await system.graphql(
        system.admin, f"{{ changeWebhookDeliveries(changeWebhookId: {hook_id}) {{ id trigger }} }}"
    )
    assert listed["data"]["changeWebhookDeliveries"] == [{"id": body["id"], "trigger": "CHANGE"}]
    # Exactly one request per (webhook, batch), kept in the matcher's own table.
    conn = await asyncpg.connect(system.dsn)
    try:
        assert await conn.fetchval("select count(*) from importer.change_requests") == 1
    finally:
        await conn.close()


async def test_filters_exclude_patterns_content_and_depth(system: System) -> None:
    hooks = {
        "all": {"includePatterns": ["*"]},
        "no_drafts": {"includePatterns": ["*"], "excludePatterns": ["*.draft.md"]},
        "creates": {"includePatterns": ["*"], "onUpdate": False, "onRemove": False},
        "removes": {"includePatterns": ["*"], "onCreate": False, "onUpdate": False},
        "bare": {"includePatterns": ["*"], "includeContent": False},
        "never": {"includePatterns": ["*"], "maxDepth": 0},
        "paused": {"includePatterns": ["*"], "enabled": False},
    }
    for name, fields in hooks.items():
        await create_change_webhook(
            system, system.admin, system.agent.url_for(name, answer_with()), **fields
        )
    await push_notes(system, system.admin, ("a.md", "1"), ("b.draft.md", "2"))
    await push_notes(system, system.admin, ("a.md", "1, again"))
    _, body = await system.graphql(system.admin, HIDE_NOTES, {"paths": ["a.md"]})
    assert body["data"]["hideNotes"]["__typename"] == "HideNotesPayload"
    await system.agent.wait_for(3, name="all")
    await quiet(system.agent)

    def seen(name: str) -> list[list[tuple[str, str]]]:
        return [
            [(c["path"], c["event"]) for c in got.body["changes"]] for got in system.agent.at(name)
        ]

    create = [("a.md", "create"), ("b.draft.md", "create")]
    assert seen("all") == [create, [("a.md", "update")], [("a.md", "remove")]]
    assert seen("no_drafts") == [[("a.md", "create")], [("a.md", "update")], [("a.md", "remove")]]
    assert seen("creates") == [create]
    assert seen("removes") == [[("a.md", "remove")]]
    assert seen("never") == [] and seen("paused") == []
    assert all("content" not in c for got in system.agent.at("bare") for c in got.body["changes"])
    removal = system.agent.at("all")[2].body["changes"][0]
    assert removal["content"] is None and removal["content_hash"] is None
    assert removal["version"] == 3


async def test_a_skip_webhooks_key_fires_nothing_and_a_plain_key_writes_at_depth_0(
    system: System,
) -> None:
    from tests.support.token_api import call

    await create_change_webhook(system, system.admin, system.agent.url, includePatterns=["*"])
    keys = {}
    for name, skip in (("linter", True), ("editor", False)):
        _, keys[name] = await create_api_key(system, system.admin, name, skipWebhooks=skip)
    for name, path in (("linter", "quiet.md"), ("editor", "loud.md")):
        status, _ = await call(
            system,
            "POST",
            "/api/notes",
            body={"changes": [{"path": path, "content": "x"}]},
            headers={"X-API-Key": keys[name]},
        )
        assert status == 200
    [got] = await system.agent.wait_for(1)
    assert await quiet(system.agent) == 1
    assert [c["path"] for c in got.body["changes"]] == ["loud.md"] and got.body["depth"] == 0


async def test_the_seeds_chain_holds_and_ends(system: System) -> None:
    """An admin edit of blog/post.md (depth 0) fires the linter (maxDepth 1, blog/**) and
    the indexer (maxDepth 2, *). The linter's answer is written at depth 1: it fires the
    indexer, not the linter. Every indexer answer (its index, at depth d + 1) fires the
    indexer again only while d + 1 < 2. Then silence."""
    linter = system.agent.url_for(
        "linter", answer_with({"path": "blog/post.md", "content": "# Post (spelling fixed)"})
    )
    indexer = system.agent.url_for("indexer", answer_anew("index.md", "indexed"))
    await create_change_webhook(
        system,
        system.admin,
        linter,
        includePatterns=["blog/**"],
        maxDepth=1,
        writePatterns=["blog/*"],
    )
    await create_change_webhook(
        system, system.admin, indexer, includePatterns=["*"], maxDepth=2, writePatterns=["index.md"]
    )
    await push_notes(system, system.admin, ("blog/post.md", "# Post (speling)"))
    await system.agent.wait_for(1, name="linter")
    await quiet(system.agent, 2.0)
    [lint] = system.agent.at("linter")
    assert lint.body["depth"] == 0 and [c["path"] for c in lint.body["changes"]] == ["blog/post.md"]
    by_depth = sorted(
        (got.body["depth"], [c["path"] for c in got.body["changes"]])
        for got in system.agent.at("indexer")
    )
    assert by_depth == [
        (0, ["blog/post.md"]),  # the admin's edit
        (1, ["blog/post.md"]),  # the linter's fix
        (1, ["index.md"]),  # the indexer's answer to the admin's edit
    ]
    _, note = await system.graphql(system.admin, '{ note(path: "blog/post.md") { content depth } }')
    assert note["data"]["note"] == {"content": "# Post (spelling fixed)", "depth": 1}
    _, index = await system.graphql(system.admin, '{ note(path: "index.md") { depth } }')
    assert index["data"]["note"]["depth"] == 2  # the last write: fires nothing


async def test_an_agent_that_always_answers_with_an_edit_cannot_loop(system: System) -> None:
    echo = system.agent.url_for("echo", answer_anew("loop.md", "again"))
    await create_change_webhook(
        system, system.admin, echo, includePatterns=["loop.md"], maxDepth=3, writePatterns=["*"]
    )
    await push_notes(system, system.admin, ("loop.md", "start"))
    await system.agent.wait_for(3, name="echo")
    assert await quiet(system.agent, 2.0) == 3  # depths 0, 1 and 2; the write at depth 3 fires none
    assert [got.body["depth"] for got in system.agent.at("echo")] == [0, 1, 2]


async def test_a_manual_trigger_sends_the_chosen_notes_as_updates_at_depth_0(
    system: System,
) -> None:
    await push_notes(system, system.admin, ("b.md", "bee"), ("a.md", "ay"))
    hook_id, _ = await create_change_webhook(
        system, system.admin, system.agent.url, includePatterns=["nothing/*"]
    )
    _, body = await system.graphql(
        system.admin,
        f'mutation {{ triggerChangeWebhook(id: {hook_id}, paths: ["b.md", "a.md"]) {{ deliveryId }} }}',
    )
    delivery_id = body["data"]["triggerChangeWebhook"]["deliveryId"]
    [got] = await system.agent.wait_for(1)
    assert got.body["id"] == delivery_id and got.body["trigger"] == "manual"
    assert got.body["depth"] == 0
    assert [(c["path"], c["event"], c["content"]) for c in got.body["changes"]] == [
        ("a.md", "update", "ay"),
        ("b.md", "update", "bee"),
    ]
    _, body = await system.graphql(
        system.admin,
        f'mutation {{ triggerChangeWebhook(id: {hook_id}, paths: ["nope.md"]) {{ deliveryId }} }}',
    )
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "paths"}


async def test_a_replayed_batch_never_requests_a_second_delivery(system: System) -> None:
    """The matcher's checkpoint moved back (as after a crash between its commit and the
    next step): the same batches are read again, and the (webhook, batch) key holds."""
    await create_change_webhook(system, system.admin, system.agent.url, includePatterns=["*"])
    await push_notes(system, system.admin, ("one.md", "1"))
    await system.agent.wait_for(1)
    conn = await asyncpg.connect(system.dsn)
    try:
        await conn.execute("update importer.change_matcher_checkpoint set txid = 0, position = 0")
        await eventually(
            lambda: conn.fetchval("select txid > 0 from importer.change_matcher_checkpoint")
        )
        await push_notes(system, system.admin, ("two.md", "2"))
        await system.agent.wait_for(2)
        assert await quiet(system.agent) == 2
        assert await conn.fetchval("select count(*) from importer.change_requests") == 2
    finally:
        await conn.close()


async def test_a_retry_resends_the_same_changes_with_the_previous_error(settings: Settings) -> None:
    from datetime import timedelta

    from tests.support.flows import retry_due

    answers = iter([500, 200])

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(answers))

    clock = ManualClock(datetime.now(UTC))
    agent = await Agent().start()
    try:
        async with running(settings, clock) as r:
            admin = await admin_token(settings.database_url)
            await create_change_webhook(
                r, admin, agent.url_for("flaky", flaky), includePatterns=["*"], maxRetries=1
            )
            await push_notes(r, admin, ("b.md", "2"), ("a.md", "1"))
            [first] = await agent.wait_for(1)
            await eventually(lambda: retry_due(settings.database_url, first.body["id"]))
            clock.advance(timedelta(seconds=10))
            [_, second] = await agent.wait_for(2)
            delivery = await finished(r, admin, first.body["id"])
    finally:
        await agent.stop()
    assert second.body["id"] == first.body["id"] and second.body["attempt"] == 2
    assert second.body["trigger"] == "retry" and second.body["kind"] == "change"
    assert second.body["changes"] == first.body["changes"]
    assert [c["path"] for c in second.body["changes"]] == ["a.md", "b.md"]
    assert second.body["depth"] == 0 and "500" in second.body["previous_error"]
    assert delivery["status"] == "success" and len(delivery["attempts"]) == 2


async def test_the_readme_linter_fixes_an_admin_edit_once(system: System, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The README's change agent, run as written, on a real change webhook."""
    section = README.split("## Change webhooks", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    lint = namespace["lint"]

    url = system.agent.url_for("lint", lambda request, _: lint(request))
    _, secret = await create_change_webhook(
        system, system.admin, url, includePatterns=["blog/**"], maxDepth=1, writePatterns=["blog/*"]
    )
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    await push_notes(system, system.admin, ("blog/post.md", "teh cat sat"), ("blog/ok.md", "fine"))
    await system.agent.wait_for(1, name="lint")

    async def fixed() -> Any:
        _, body = await system.graphql(
            system.admin, '{ note(path: "blog/post.md") { content depth } }'
        )
        return body["data"]["note"] if body["data"]["note"]["depth"] == 1 else None

    assert await eventually(fixed) == {"content": "the cat sat", "depth": 1}
    assert await quiet(system.agent) == 1  # its own fix (depth 1) does not call it again


async def test_gone_disables_it_and_its_token_is_one_deeper_than_the_batch(system: System) -> None:
    """410 and auto-disable work as for cron webhooks, and a disabled change webhook hears
    nothing more; with passApiKey the api_token is at depth d + 1."""
    import jwt

    async def gone(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=410)

    hook_id, _ = await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("gone", gone),
        includePatterns=["*"],
        passApiKey=True,
        maxDepth=3,
    )
    await push_notes(system, system.admin, ("first.md", "1"))
    [got] = await system.agent.wait_for(1, name="gone")
    claims = jwt.decode(got.body["api_token"], options={"verify_signature": False})
    assert got.body["depth"] == 0 and claims["depth"] == 1
    assert claims["sub"] == f"webhook:{hook_id}" and got.body["api_url"]

    async def disabled() -> Any:
        _, body = await system.graphql(
            system.admin, f"{{ changeWebhook(id: {hook_id}) {{ enabled disabledReason }} }}"
        )
        return (
            body["data"]["changeWebhook"] if not body["data"]["changeWebhook"]["enabled"] else None
        )

    assert "410" in (await eventually(disabled))["disabledReason"]
    await push_notes(system, system.admin, ("second.md", "2"))
    assert await quiet(system.agent) == 1  # disabled: the second batch fires nothing


async def test_an_idempotency_key_creates_one_change_webhook(system: System) -> None:
    fields = {"includePatterns": ["*"], "idempotencyKey": "setup-linter"}
    first, secret = await create_change_webhook(system, system.admin, system.agent.url, **fields)
    again, replayed = await create_change_webhook(system, system.admin, system.agent.url, **fields)
    assert (again, replayed) == (first, secret)
    # The key is spent on a change webhook: a cron create with it is refused.
    _, body = await system.graphql(
        system.admin,
        CREATE_WEBHOOK,
        {
            "input": {
                "url": "https://agent.example/h",
                "cronSchedule": "* * * * *",
                "idempotencyKey": "setup-linter",
            }
        },
    )
    assert body["errors"][0]["extensions"]["code"] == "CONFLICT"
    _, body = await system.graphql(system.admin, "{ changeWebhooks { id } cronWebhooks { id } }")
    assert body["data"] == {"changeWebhooks": [{"id": first}], "cronWebhooks": []}


async def test_the_matcher_never_scans_delivery_events(system: System) -> None:
    """A herd of cron deliveries writes no note: the matcher tails only the partition of
    the streams kept forever (webhooks, notes), so it never scans a delivery event (a
    tail of every event did, once per herd) and its checkpoint is the last kept event."""
    from tests.support.flows import create_webhook, trigger

    hook_id, _ = await create_webhook(system, system.admin, system.agent.url)
    for _ in range(3):
        await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    conn = await asyncpg.connect(system.dsn)
    try:
        await eventually(
            lambda: conn.fetchval(
                """select (c.txid, c.position) = (k.txid, k.position)
                from importer.change_matcher_checkpoint c,
                     (select txid, position from eventstore.events_kept
                      order by txid desc, position desc limit 1) k"""
            )
        )
        assert (
            await conn.fetchval(
                "select count(*) from eventstore.events_kept where stream like 'delivery-%'"
            )
            == 0
        )
    finally:
        await conn.close()
