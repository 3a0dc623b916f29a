"""replayDeliveries (CONTRACT §12) on the running services, with a real agent on loopback:
failed deliveries of the window only, oldest first, sent again by the real dispatcher; a
change delivery's replay carries its changes; bad input changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from cronhooks_admin import replay
from cronhooks_common.clock import ManualClock, iso
from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, finished, trigger
from tests.support.inprocess import Running, admin_token, eventually, running, window_start

REPLAY = """mutation($webhookId: Int!, $since: DateTime!, $until: DateTime) {
  replayDeliveries(webhookId: $webhookId, since: $since, until: $until) { deliveryIds } }"""
PUSH = """mutation($input: PushNotesInput!) { pushNotes(input: $input) { __typename } }"""


class Switch:
    """An agent route that fails (500) while `down`."""

    def __init__(self) -> None:
        self.down = True

    async def __call__(self, _: web.Request, __: Received) -> web.StreamResponse:
        if self.down:
            return web.Response(status=500, text="down")
        return web.json_response({"status": "ok"})


@pytest.fixture
async def system(settings: Settings) -> AsyncIterator[tuple[Running, str, ManualClock, Agent]]:
    clock = ManualClock(window_start())
    agent = await Agent().start()
    try:
        async with running(settings, clock) as r:
            yield r, await admin_token(settings.database_url), clock, agent
    finally:
        await agent.stop()


async def replay_of(
    r: Running, token: str, hook_id: int, since: datetime, until: datetime | None = None
) -> dict[str, Any]:
    variables = {
        "webhookId": hook_id,
        "since": iso(since),
        "until": None if until is None else iso(until),
    }
    status, body = await r.graphql(token, REPLAY, variables)
    assert status == 200, body
    return body


async def replayed_ids(
    r: Running, token: str, hook_id: int, since: datetime, until: datetime | None = None
) -> list[int]:
    body = await replay_of(r, token, hook_id, since, until)
    assert "errors" not in body, body
    return body["data"]["replayDeliveries"]["deliveryIds"]  # type: ignore[no-any-return]


async def first_request(dsn: str, delivery_id: int) -> dict[str, Any]:
    [requested, *_] = await events_of(dsn, f"delivery-{delivery_id}")
    assert requested["type"] == "delivery.requested"
    return requested["data"]  # type: ignore[no-any-return]


async def test_only_failed_deliveries_inside_the_window_are_sent_again_oldest_first(  # type: ignore[no-untyped-def]
    system, settings: Settings
) -> None:
    r, token, clock, agent = system
    switch = Switch()
    hook_id, _ = await create_webhook(r, token, agent.url_for("flaky", switch))
    t0 = clock.now()
    made: list[tuple[datetime, int, str]] = []  # (createdAt, id, status)
    for minute, up in enumerate([False, False, True, False, False, False]):
        clock.set(t0 + timedelta(minutes=minute))
        switch.down = not up
        d = await finished(r, token, await trigger(r, token, hook_id))
        made.append((clock.now(), d["id"], d["status"]))
    assert [s for _, _, s in made] == ["failed", "failed", "success", "failed", "failed", "failed"]
    since, until = made[1][0], made[5][0]  # [t0+1m, t0+5m): not the first nor the last

    switch.down = False
    clock.set(t0 + timedelta(minutes=10))
    ids = await replayed_ids(r, token, hook_id, since, until)
    assert len(ids) == 3 and ids == sorted(ids)
    originals = [made[1][1], made[3][1], made[4][1]]  # the failed ones, oldest first
    for new_id, old_id in zip(ids, originals, strict=True):
        data = await first_request(settings.database_url, new_id)
        assert (data["trigger"], data["replay_of"], data["attempt"]) == ("manual", old_id, 1)
        d = await finished(r, token, new_id)
        assert (d["status"], d["trigger"], d["scheduledFor"]) == ("success", "MANUAL", None)
    sent = {got.body["id"] for got in agent.at("flaky")}
    assert set(ids) <= sent and len(agent.at("flaky")) == 6 + 3

    # No upper bound: up to now; the window's own failed ones again, and the last one.
    ids_again = await replayed_ids(r, token, hook_id, since)
    assert [(await first_request(settings.database_url, i))["replay_of"] for i in ids_again] == [
        *originals,
        made[5][1],
    ]
    for i in ids_again:
        await finished(r, token, i)


async def test_a_change_delivery_is_replayed_with_the_changes_it_carried(
    system, settings: Settings
) -> None:  # type: ignore[no-untyped-def]
    r, token, clock, agent = system
    switch = Switch()
    _, body = await r.graphql(
        token,
        """mutation($url: String!) { createChangeWebhook(input: {url: $url,
        includePatterns: ["blog/**"]}) { changeWebhook { id } } }""",
        {"url": agent.url_for("lint", switch)},
    )
    hook_id = body["data"]["createChangeWebhook"]["changeWebhook"]["id"]
    since = clock.now()
    for content in ("# v1", "# v2"):
        await r.graphql(
            token, PUSH, {"input": {"updates": [{"path": "blog/a.md", "content": content}]}}
        )
        await agent.wait_for(1 if content == "# v1" else 2, name="lint")
    failed = [got.body for got in agent.at("lint")]
    assert [b["changes"][0]["content"] for b in failed] == ["# v1", "# v2"]
    for b in failed:
        assert (await finished(r, token, b["id"]))["status"] == "failed"

    switch.down = False
    clock.set(since + timedelta(minutes=1))
    ids = await replayed_ids(r, token, hook_id, since)
    assert len(ids) == 2
    got = await agent.wait_for(4, name="lint")
    by_id = {g.body["id"]: g.body for g in got}
    for new_id, old in zip(ids, failed, strict=True):
        sent = by_id[new_id]
        assert (sent["kind"], sent["trigger"], sent["depth"]) == ("change", "manual", 0)
        assert sent["changes"] == old["changes"]  # what it missed, not the note as it is now
        assert (await finished(r, token, new_id))["status"] == "success"


async def test_bad_input_is_refused_by_name_and_changes_nothing(  # type: ignore[no-untyped-def]
    system, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, token, clock, agent = system
    hook_id, _ = await create_webhook(r, token, agent.url_for("down", Switch()))
    since = clock.now()
    for second in range(3):
        clock.set(since + timedelta(seconds=second))
        assert (await finished(r, token, await trigger(r, token, hook_id)))["status"] == "failed"
    later = since + timedelta(minutes=1)
    before = await event_count(settings.database_url)

    async def refused(variables: dict[str, Any]) -> dict[str, Any]:
        _, body = await r.graphql(token, REPLAY, variables)
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
    assert await event_count(settings.database_url) == before

    # Inside the cap, and a window with nothing failed in it: an empty answer.
    ids = await replayed_ids(r, token, hook_id, since, since + timedelta(seconds=2))
    assert len(ids) == 2
    for i in ids:
        await finished(r, token, i)
    assert await replayed_ids(r, token, hook_id, later + timedelta(days=1)) == []

    await r.graphql(token, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}")
    # Five failures in a row raised an alert, which the deletion resolves (CONTRACT §12):
    # count once that has happened.
    await eventually(lambda: alert_resolved(settings.database_url))
    before = await event_count(settings.database_url)
    assert (await refused(ok))["code"] == "NOT_FOUND"  # a deleted webhook is unknown
    assert await event_count(settings.database_url) == before


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


async def event_count(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("select count(*) from eventstore.events"))
    finally:
        await conn.close()


def test_the_cap_is_what_the_schema_says() -> None:
    sdl = (Path(replay.__file__).parent / "graphql" / "replay.graphql").read_text()
    assert f"At most {replay.MAX_REPLAYED} deliveries in one call" in sdl
