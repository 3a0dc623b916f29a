"""attachNotes (CONTRACT §13): the notes each delivery carries as `context_notes`, read by
the dispatcher when it sends the attempt — on the running services, with a real agent on
loopback and injected time."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from cronhooks_common import db
from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from cronhooks_dispatcher.context_notes import (
    MAX_CONTEXT_BYTES,
    ContextNoteLoader,
    ContextNotes,
    Patterns,
)
from cronhooks_importer.rules import content_hash
from tests.support.agent import Received
from tests.support.flows import create_webhook, finished, push_notes, retry_due, trigger
from tests.support.graphql import CREATE_WEBHOOK, HIDE_NOTES
from tests.support.inprocess import admin_token, eventually, running
from tests.support.projections import quiet, rebuild, snapshot
from tests.support.system import System

UPDATE = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input)
  { cronWebhook { attachNotes } } }"""


def answer(code: int):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=code)

    return respond


def note(path: str, content: str) -> dict[str, str]:
    return {"path": path, "content": content, "content_hash": content_hash(content)}


def short(sent: dict[str, str]) -> dict[str, str]:
    """A context note as the attempt log records it: no content."""
    return {"path": sent["path"], "content_hash": sent["content_hash"]}


async def test_matching_readable_visible_notes_are_attached_by_path(system: System) -> None:
    await push_notes(
        system,
        system.admin,
        ("notes/b.md", "B"),
        ("notes/a.md", "A ✓"),
        ("notes/gone.md", "hidden soon"),
        ("shared/x.md", "X"),
        ("shared/y.txt", "matches attachNotes, not readPatterns"),
        ("other/z.md", "matches neither"),
    )
    _, body = await system.graphql(system.admin, HIDE_NOTES, {"paths": ["notes/gone.md"]})
    assert body["data"]["hideNotes"]["__typename"] == "HideNotesPayload"
    hook, secret = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("context", answer(200)),
        attachNotes=["notes/*", "shared/*"],
        readPatterns=["notes/*", "shared/*.md"],
    )
    plain, _ = await create_webhook(
        system, system.admin, system.agent.url_for("plain", answer(200))
    )
    delivery_id = await trigger(system, system.admin, hook)
    await trigger(system, system.admin, plain)
    [got] = await system.agent.wait_for(1, name="context")
    [without] = await system.agent.wait_for(1, name="plain")
    sent = Webhook(secret).verify(got.raw, got.headers)  # signed over the bytes with the notes
    assert sent["context_notes"] == [
        note("notes/a.md", "A ✓"),
        note("notes/b.md", "B"),
        note("shared/x.md", "X"),
    ]
    assert "context_truncated" not in sent
    # Without attachNotes the body is as before: no context keys at all.
    assert "context_notes" not in without.body and "context_truncated" not in without.body
    # The attempt log records the body as sent, each note without its content (the
    # note's history holds it under the hash).
    d = await finished(system, system.admin, delivery_id)
    logged = json.loads(d["attempts"][0]["requestBody"])
    assert logged == {**sent, "context_notes": [short(n) for n in sent["context_notes"]]}


async def test_a_retry_sends_the_notes_as_they_are_at_that_attempt(system: System) -> None:
    answers = iter([500, 200])

    async def flaky(request: web.Request, entry: Received) -> web.StreamResponse:
        return await answer(next(answers))(request, entry)

    await push_notes(
        system, system.admin, ("ctx/plan.md", "version one"), ("ctx/old.md", "goes away")
    )
    hook, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("flaky", flaky),
        attachNotes=["ctx/*"],
        maxRetries=1,
    )
    delivery_id = await trigger(system, system.admin, hook)
    await eventually(lambda: retry_due(system.dsn, delivery_id))
    await push_notes(
        system, system.admin, ("ctx/plan.md", "version two"), ("ctx/new.md", "arrived")
    )
    _, body = await system.graphql(system.admin, HIDE_NOTES, {"paths": ["ctx/old.md"]})
    assert body["data"]["hideNotes"]["__typename"] == "HideNotesPayload"
    system.clock.advance(timedelta(seconds=10))
    d = await finished(system, system.admin, delivery_id)
    assert d["status"] == "success" and d["attempt"] == 2
    first, second = system.agent.at("flaky")
    assert first.body["context_notes"] == [
        note("ctx/old.md", "goes away"),
        note("ctx/plan.md", "version one"),
    ]
    assert second.body["attempt"] == 2
    assert second.body["context_notes"] == [
        note("ctx/new.md", "arrived"),
        note("ctx/plan.md", "version two"),
    ]
    logged = [json.loads(a["requestBody"])["context_notes"] for a in d["attempts"]]
    assert logged == [
        [short(n) for n in first.body["context_notes"]],
        [short(n) for n in second.body["context_notes"]],
    ]


async def test_the_cap_keeps_whole_notes_in_path_order_and_says_truncated(system: System) -> None:
    big = "x" * 400_000
    # a and b fit in 1 MiB together; c does not, and d (small) is left out after it too:
    # the notes attached are always the first ones by path.
    await push_notes(system, system.admin, ("big/a.md", big), ("big/b.md", big))
    await push_notes(system, system.admin, ("big/c.md", big), ("big/d.md", "small"))
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("big", answer(200)), attachNotes=["big/*"]
    )
    await trigger(system, system.admin, hook)
    [got] = await system.agent.wait_for(1, name="big")
    assert [n["path"] for n in got.body["context_notes"]] == ["big/a.md", "big/b.md"]
    assert got.body["context_truncated"] is True
    assert all(n["content"] == big for n in got.body["context_notes"])


class Counting(ContextNoteLoader):
    """The real loader, counting the batches it queries."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.batches: list[int] = []

    async def batch_load_fn(self, keys: list[Patterns]) -> list[ContextNotes]:
        self.batches.append(len(keys))
        return await super().batch_load_fn(keys)


async def test_one_query_answers_a_batch_of_webhooks_each_with_its_own_patterns(
    settings: Settings,
) -> None:
    """The loader directly: keys of one event-loop iteration share a query; each gets its
    own notes; the cap is counted per key, on path + content + content_hash bytes."""
    pool = await db.create_pool(settings.database_url, name="test")
    try:
        rows = [("a/1.md", "one"), ("a/2.md", "two"), ("b/1.md", "bee"), ("a/3.md", "three")]
        await pool.executemany(
            "insert into importer.notes (path, content, content_hash, version, depth,"
            " updated_at, updated_by, removed) values ($1, $2, $3, 1, 0, now(), 'test', $4)",
            [(p, c, content_hash(c), p == "a/3.md") for p, c in rows],
        )
        size = len("a/1.md") + len("one") + 64
        shared = Counting(pool)
        everything, only_b, unreadable, again = await asyncio.gather(
            shared.load((("*",), ("*",))),
            shared.load((("b/*", "a/2.md"), ("b/*",))),
            shared.load((("a/*",), ())),
            shared.load((("*",), ("*",))),  # asked once, answered to both
        )
        assert shared.batches == [4]  # four sends in one iteration: one query
        assert again == everything
        capped = await ContextNoteLoader(pool, cap=size).load((("a/*",), ("*",)))
        assert [n["path"] for n in everything.notes] == ["a/1.md", "a/2.md", "b/1.md"]
        assert not everything.truncated
        assert [n["path"] for n in only_b.notes] == ["b/1.md"]
        assert unreadable.notes == [] and not unreadable.truncated
        assert [n["path"] for n in capped.notes] == ["a/1.md"] and capped.truncated
        assert MAX_CONTEXT_BYTES == 1 << 20
    finally:
        await pool.close()


async def test_attach_notes_is_checked_like_read_patterns_and_round_trips(system: System) -> None:
    hook, _ = await create_webhook(
        system, system.admin, "https://agent.example/hook", attachNotes=["a/*"]
    )
    base = {"url": "https://agent.example/hook", "cronSchedule": "* * * * *"}
    cases = [
        (CREATE_WEBHOOK, {**base, "attachNotes": ["/etc/*"]}),
        (CREATE_WEBHOOK, {**base, "attachNotes": ["notes/../secret/*"]}),
        (CREATE_WEBHOOK, {**base, "attachNotes": ["a\u0001b"]}),
        (CREATE_WEBHOOK, {**base, "attachNotes": ["x" * 513]}),
        (CREATE_WEBHOOK, {**base, "attachNotes": ["[unbalanced"]}),
        (CREATE_WEBHOOK, {**base, "attachNotes": ["*"] * 101}),
        (CREATE_WEBHOOK, {**base, "attachNotes": None}),
        (UPDATE, {"id": hook, "attachNotes": ["../x"]}),
        (UPDATE, {"id": hook, "attachNotes": [7]}),
    ]
    for query, values in cases:
        _, body = await system.graphql(system.admin, query, {"input": values})
        [error] = body["errors"]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "attachNotes"}, values
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook}) {{ attachNotes }} }}")
    assert body["data"]["cronWebhook"] == {"attachNotes": ["a/*"]}
    _, body = await system.graphql(
        system.admin, UPDATE, {"input": {"id": hook, "attachNotes": ["b/*", "c/*.md"]}}
    )
    assert body["data"]["updateCronWebhook"]["cronWebhook"] == {"attachNotes": ["b/*", "c/*.md"]}
    plain, _ = await create_webhook(system, system.admin, "https://agent.example/hook")
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {plain}) {{ attachNotes }} }}"
    )
    assert body["data"]["cronWebhook"] == {"attachNotes": []}


async def test_attach_notes_read_model_equals_its_rebuild(settings: Settings, vhost: str) -> None:

    async with running(settings, ManualClock(datetime.now(UTC))) as r:
        token = await admin_token(settings.database_url)
        a, _ = await create_webhook(r, token, "https://agent.example/a", attachNotes=["x/*"])
        await create_webhook(r, token, "https://agent.example/b")
        _, body = await r.graphql(token, UPDATE, {"input": {"id": a, "attachNotes": ["y/*", "z"]}})
        assert "errors" not in body, body
        await quiet(settings.database_url, vhost)
        live = await snapshot(settings.database_url)
        # (the snapshot's plain connection reads jsonb as text)
        attached = [json.loads(w["attach_notes"]) for w in live["admin.webhooks"]]
        assert attached == [["y/*", "z"], []]
    await rebuild(settings)
    assert (await snapshot(settings.database_url))["admin.webhooks"] == live["admin.webhooks"]
