"""replayDeliveries (CONTRACT §12) on the running services, with a real agent on loopback:
failed deliveries of the window only, oldest first, sent again by the real dispatcher; a
change delivery's replay carries its paths and events, built from the notes and the
webhook as they are now; a failed delivery is replayed once and a replay never; bad input
changes nothing."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_admin.commands import replay
from cronhooks_common.clock import iso
from tests.support.agent import Received
from tests.support.flows import (
    create_api_key,
    create_change_webhook,
    create_webhook,
    event_count,
    events_of,
    finished,
    trigger,
)
from tests.support.graphql import PUSH_NOTES, REPLAY_DELIVERIES, UPDATE_CHANGE_WEBHOOK
from tests.support.inprocess import Running, eventually, window_start
from tests.support.system import System
from tests.support.token_api import call


class Switch:
    """An agent route that fails (500) while `down`."""

    def __init__(self) -> None:
        self.down = True

    @classmethod
    def up(cls) -> Switch:
        switch = cls()
        switch.down = False
        return switch

    async def __call__(self, _: web.Request, __: Received) -> web.StreamResponse:
        if self.down:
            return web.Response(status=500, text="down")
        return web.json_response({"status": "ok"})


pytestmark = pytest.mark.system(start=window_start)


async def replay_of(
    r: Running, token: str, hook_id: int, since: datetime, until: datetime | None = None
) -> dict[str, Any]:
    variables = {
        "webhookId": hook_id,
        "since": iso(since),
        "until": None if until is None else iso(until),
    }
    status, body = await r.graphql(token, REPLAY_DELIVERIES, variables)
    assert status == 200, body
    return body


async def replayed_ids(
    r: Running, token: str, hook_id: int, since: datetime, until: datetime | None = None
) -> list[int]:
    body = await replay_of(r, token, hook_id, since, until)
    assert "errors" not in body, body
    return body["data"]["replayDeliveries"]["deliveryIds"]  # type: ignore[no-any-return]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def first_request(dsn: str, delivery_id: int) -> dict[str, Any]:
    [requested, *_] = await events_of(dsn, f"delivery-{delivery_id}")
    assert requested["type"] == "delivery.requested"
    return requested["data"]  # type: ignore[no-any-return]


async def test_only_failed_deliveries_inside_the_window_are_sent_again_oldest_first(
    system: System,
) -> None:
    switch = Switch()
    hook_id, _ = await create_webhook(system, system.admin, system.agent.url_for("flaky", switch))
    t0 = system.clock.now()
    made: list[tuple[datetime, int, str]] = []  # (createdAt, id, status)
    for minute, up in enumerate([False, False, True, False, False, False]):
        system.clock.set(t0 + timedelta(minutes=minute))
        switch.down = not up
        d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
        made.append((system.clock.now(), d["id"], d["status"]))
    assert [s for _, _, s in made] == ["failed", "failed", "success", "failed", "failed", "failed"]
    since, until = made[1][0], made[5][0]  # [t0+1m, t0+5m): not the first nor the last

    switch.down = False
    system.clock.set(t0 + timedelta(minutes=10))
    ids = await replayed_ids(system, system.admin, hook_id, since, until)
    assert len(ids) == 3 and ids == sorted(ids)
    originals = [made[1][1], made[3][1], made[4][1]]  # the failed ones, oldest first
    for new_id, old_id in zip(ids, originals, strict=True):
        data = await first_request(system.dsn, new_id)
        assert (data["trigger"], data["replay_of"], data["attempt"]) == ("manual", old_id, 1)
        d = await finished(system, system.admin, new_id)
        assert (d["status"], d["trigger"], d["scheduledFor"]) == ("success", "MANUAL", None)
    sent = {got.body["id"] for got in system.agent.at("flaky")}
    assert set(ids) <= sent and len(system.agent.at("flaky")) == 6 + 3

    # No upper bound: up to now. The window's failed ones were replayed already (and their
    # replays succeeded): only the last one is new.
    ids_again = await replayed_ids(system, system.admin, hook_id, since)
    assert [(await first_request(system.dsn, i))["replay_of"] for i in ids_again] == [made[5][1]]
    for i in ids_again:
        await finished(system, system.admin, i)


async def test_a_change_delivery_is_replayed_with_the_notes_as_they_are_now(system: System) -> None:
    """CONTRACT §12 (revision 3): the same paths and events at the same depth, with each
    note's current version, hash and content (a retry, by contrast, resends what it sent)."""
    switch = Switch()
    hook_id, _ = await create_change_webhook(
        system, system.admin, system.agent.url_for("lint", switch), includePatterns=["blog/**"]
    )
    since = system.clock.now()
    for content in ("# v1", "# v2"):
        await system.graphql(
            system.admin,
            PUSH_NOTES,
            {"input": {"updates": [{"path": "blog/a.md", "content": content}]}},
        )
        await system.agent.wait_for(1 if content == "# v1" else 2, name="lint")
    failed = [got.body for got in system.agent.at("lint")]
    assert [b["changes"][0]["content"] for b in failed] == ["# v1", "# v2"]
    for b in failed:
        assert (await finished(system, system.admin, b["id"]))["status"] == "failed"

    switch.down = False
    system.clock.set(since + timedelta(minutes=1))
    ids = await replayed_ids(system, system.admin, hook_id, since)
    assert len(ids) == 2
    got = await system.agent.wait_for(4, name="lint")
    by_id = {g.body["id"]: g.body for g in got}
    for new_id, old in zip(ids, failed, strict=True):
        sent = by_id[new_id]
        assert (sent["kind"], sent["trigger"], sent["depth"]) == ("change", "manual", 0)
        [change] = sent["changes"]
        assert (change["path"], change["event"]) == ("blog/a.md", old["changes"][0]["event"])
        assert (change["version"], change["content"]) == (2, "# v2")
        assert change["content_hash"] == failed[1]["changes"][0]["content_hash"]
        assert (await finished(system, system.admin, new_id))["status"] == "success"


async def test_a_change_replay_follows_the_webhooks_current_settings(system: System) -> None:
    """Issue 37, finding 7: a replay sent the old content to the new URL after
    includeContent and readPatterns were narrowed. Now the webhook as it is decides: its
    URL, its readPatterns (content and hash null outside), its includeContent."""
    down = Switch()
    reads, _ = await create_change_webhook(
        system, system.admin, system.agent.url_for("old", down), includePatterns=["*"]
    )
    bare, _ = await create_change_webhook(
        system, system.admin, system.agent.url_for("old", down), includePatterns=["*"]
    )
    since = system.clock.now()
    notes = {"pub/a.md": "v1", "secret/b.md": "s1", "gone.md": "bye"}
    await system.graphql(
        system.admin,
        PUSH_NOTES,
        {"input": {"updates": [{"path": p, "content": c} for p, c in notes.items()]}},
    )
    for got in await system.agent.wait_for(2, name="old"):
        assert (await finished(system, system.admin, got.body["id"]))["status"] == "failed"

    # The notes move on without firing anything (a skipWebhooks key) ...
    _, key = await create_api_key(system, system.admin, "quiet", skipWebhooks=True)
    quiet = {"X-API-Key": key}
    status, _ = await call(
        system, "POST", "/api/notes", body={"changes": [{"path": "pub/a.md", "content": "v2"}]},
        headers=quiet,
    )  # fmt: skip
    assert status == 200
    status, _ = await call(system, "DELETE", "/api/notes/gone.md", headers=quiet)
    assert status == 200

    async def projected() -> bool:
        _, body = await system.graphql(
            system.admin,
            '{ a: note(path: "pub/a.md") { content } g: note(path: "gone.md") { path } }',
        )
        return body["data"] == {"a": {"content": "v2"}, "g": None}

    await eventually(projected)
    # ... and the admin narrows both webhooks and points them elsewhere.
    for hook_id, route, narrowed in (
        (reads, "new-reads", {"readPatterns": ["pub/*"]}),
        (bare, "new-bare", {"includeContent": False}),
    ):
        url = system.agent.url_for(route, Switch.up())
        _, body = await system.graphql(
            system.admin, UPDATE_CHANGE_WEBHOOK, {"input": {"id": hook_id, "url": url, **narrowed}}
        )
        assert "errors" not in body, body

    system.clock.set(since + timedelta(minutes=1))
    assert len(await replayed_ids(system, system.admin, reads, since)) == 1
    assert len(await replayed_ids(system, system.admin, bare, since)) == 1
    [to_reads] = await system.agent.wait_for(1, name="new-reads")
    [to_bare] = await system.agent.wait_for(1, name="new-bare")
    v2, s1 = sha256("v2"), sha256("s1")
    assert to_reads.body["changes"] == [
        # removed since: nothing to show, the removal's version
        {"path": "gone.md", "event": "create", "version": 2, "content_hash": None, "content": None},
        {"path": "pub/a.md", "event": "create", "version": 2, "content_hash": v2, "content": "v2"},
        {"path": "secret/b.md", "event": "create", "version": 1, "content_hash": None,
         "content": None},
    ]  # fmt: skip
    assert to_bare.body["changes"] == [
        {"path": "gone.md", "event": "create", "version": 2, "content_hash": None},
        {"path": "pub/a.md", "event": "create", "version": 2, "content_hash": v2},
        {"path": "secret/b.md", "event": "create", "version": 1, "content_hash": s1},
    ]
    assert b"s1" not in to_reads.raw and b"v1" not in to_reads.raw + to_bare.raw
    assert len(system.agent.at("old")) == 2  # nothing more went to the old URL


async def three_failed_deliveries(system: System) -> tuple[int, datetime]:
    """A webhook whose agent is down, and three failed deliveries of it a second apart: the
    webhook's id and the time of the first."""
    hook_id, _ = await create_webhook(system, system.admin, system.agent.url_for("down", Switch()))
    since = system.clock.now()
    for second in range(3):
        system.clock.set(since + timedelta(seconds=second))
        assert (await finished(system, system.admin, await trigger(system, system.admin, hook_id)))[
            "status"
        ] == "failed"
    return hook_id, since


async def test_a_window_replayed_again_replays_nothing_new(system: System) -> None:
    """Issue 37, finding 7: replaying the same window again re-replayed the replays (and
    the originals, still failed): 17 → 34 → … → 544 POSTs. A failed delivery is replayed
    once, and a replay never."""
    hook_id, since = await three_failed_deliveries(system)

    replayed: list[int] = []
    for minute in range(1, 5):  # the agent stays down: every replay fails as well
        system.clock.set(since + timedelta(minutes=minute))
        ids = await replayed_ids(system, system.admin, hook_id, since)
        replayed.append(len(ids))
        for i in ids:
            assert (await finished(system, system.admin, i))["status"] == "failed"
    assert replayed == [3, 0, 0, 0]  # the old code: [3, 6, 12, 24]
    assert len(system.agent.at("down")) == 3 + 3

    # Two admins replaying the same window at once still replay each delivery once.
    for second in range(2):
        system.clock.set(since + timedelta(minutes=10, seconds=second))
        assert (await finished(system, system.admin, await trigger(system, system.admin, hook_id)))[
            "status"
        ] == "failed"
    system.clock.set(since + timedelta(minutes=11))
    both = await asyncio.gather(
        *(replayed_ids(system, system.admin, hook_id, since) for _ in range(2))
    )
    assert sorted(len(ids) for ids in both) == [0, 2]
    for i in both[0] + both[1]:
        await finished(system, system.admin, i)


async def test_bad_input_is_refused_by_name_and_changes_nothing(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook_id, since = await three_failed_deliveries(system)
    later = since + timedelta(minutes=1)
    before = await event_count(system.dsn)

    async def refused(variables: dict[str, Any]) -> dict[str, Any]:
        _, body = await system.graphql(system.admin, REPLAY_DELIVERIES, variables)
        assert body.get("data") is None and len(body["errors"]) == 1, body
        return body["errors"][0]["extensions"]  # type: ignore[no-any-return]

    ok = {"webhookId": hook_id, "since": iso(since)}
    for until in (since, since - timedelta(seconds=1)):
        assert await refused({**ok, "until": iso(until)}) == {
            "code": "BAD_USER_INPUT",
            "field": "until",
        }
    for bad in ("yesterday", "2026-02-30T00:00:00Z", "2026-02-09T09:00:00", 12):
        assert await refused({**ok, "since": bad}) == {"code": "BAD_USER_INPUT", "field": "since"}
    assert (await refused({**ok, "webhookId": "x"}))["field"] == "webhookId"
    assert (await refused({**ok, "webhookId": 987654}))["code"] == "NOT_FOUND"
    monkeypatch.setattr(replay, "MAX_REPLAYED", 2)  # three failed ones: past the cap
    assert await refused({**ok, "until": iso(later)}) == {
        "code": "BAD_USER_INPUT",
        "field": "until",
    }
    assert await event_count(system.dsn) == before

    # Inside the cap, and a window with nothing failed in it: an empty answer.
    ids = await replayed_ids(system, system.admin, hook_id, since, since + timedelta(seconds=2))
    assert len(ids) == 2
    for i in ids:
        await finished(system, system.admin, i)
    assert await replayed_ids(system, system.admin, hook_id, later + timedelta(days=1)) == []

    await system.graphql(system.admin, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}")
    # Five failures in a row raised an alert, which the deletion resolves (CONTRACT §12):
    # count once that has happened.
    await eventually(lambda: alert_resolved(system.dsn))
    before = await event_count(system.dsn)
    assert (await refused(ok))["code"] == "NOT_FOUND"  # a deleted webhook is unknown
    assert await event_count(system.dsn) == before


async def alert_resolved(dsn: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(
            await conn.fetchval(
                "select count(*) from eventstore.events where type = 'alert.resolved'"
            )
        )
    finally:
        await conn.close()


def test_the_cap_is_what_the_schema_says() -> None:
    sdl = (Path(replay.__file__).parents[1] / "graphql" / "replay.graphql").read_text()
    assert f"At most {replay.MAX_REPLAYED} deliveries in one call" in sdl
