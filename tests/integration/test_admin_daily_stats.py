"""`dailyStats(days)` (the web page's chart, CONTRACT §10): finished deliveries per day in
the webhook's zone, succeeded vs failed and p95 duration, every day listed; bounded
`days`; a retried manual delivery is one manual delivery; `logsExpired` is there."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

from aiohttp import web

from tests.support.agent import Received
from tests.support.flows import create_webhook, finished, retry_due, trigger
from tests.support.inprocess import eventually
from tests.support.system import System

ZONE = "Pacific/Kiritimati"  # UTC+14: its days are not UTC's


def daily(hook: int, days: str = "") -> str:
    return f"""{{ cronWebhook(id: {hook}) {{
        dailyStats{days} {{ day total succeeded failed p95DurationMs }} }} }}"""


async def test_daily_stats_count_each_day_in_the_webhooks_zone(system: System) -> None:
    codes = iter([200, 200, 500])

    async def scripted(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(codes))

    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("s", scripted), timezone=ZONE
    )
    first_day = system.clock.now()
    for _ in range(2):
        await finished(system, system.admin, await trigger(system, system.admin, hook))
    system.clock.advance(timedelta(days=1))
    failed_day = system.clock.now()
    await finished(system, system.admin, await trigger(system, system.admin, hook))
    system.clock.advance(timedelta(days=2))

    async def settled() -> list[dict[str, object]] | None:
        _, body = await system.graphql(system.admin, daily(hook))
        days = body["data"]["cronWebhook"]["dailyStats"]
        return days if sum(d["total"] for d in days) == 3 else None

    days = await eventually(settled)
    zone = ZoneInfo(ZONE)
    today = system.clock.now().astimezone(zone).date()
    assert [d["day"] for d in days] == [str(today - timedelta(days=n)) for n in range(6, -1, -1)]
    by_day = {d["day"]: d for d in days}
    ok = by_day[str(first_day.astimezone(zone).date())]
    bad = by_day[str(failed_day.astimezone(zone).date())]
    assert (ok["total"], ok["succeeded"], ok["failed"]) == (2, 2, 0)
    assert (bad["total"], bad["succeeded"], bad["failed"]) == (1, 0, 1)
    assert ok["p95DurationMs"] is not None and bad["p95DurationMs"] is not None
    quiet = [d for d in days if d not in (ok, bad)]
    assert len(quiet) == 5
    assert all((d["total"], d["p95DurationMs"]) == (0, None) for d in quiet)

    _, body = await system.graphql(system.admin, daily(hook, "(days: 2)"))
    assert [d["day"] for d in body["data"]["cronWebhook"]["dailyStats"]] == [
        str(today - timedelta(days=1)),
        str(today),
    ]
    for bad_days in (0, 32):
        _, body = await system.graphql(system.admin, daily(hook, f"(days: {bad_days})"))
        [error] = body["errors"]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "days"}


async def test_change_webhooks_have_daily_stats_too(system: System) -> None:
    _, body = await system.graphql(
        system.admin,
        """mutation($url: String!) { createChangeWebhook(input: {url: $url,
        includePatterns: ["a/*"]}) { changeWebhook { dailyStats(days: 3) { day total } } } }""",
        {"url": system.agent.url},
    )
    today = system.clock.now().date()  # UTC
    assert body["data"]["createChangeWebhook"]["changeWebhook"]["dailyStats"] == [
        {"day": str(today - timedelta(days=n)), "total": 0} for n in (2, 1, 0)
    ]


async def test_a_retried_manual_delivery_stays_manual(system: System) -> None:
    answers = iter([500, 200])

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=next(answers))

    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("f", flaky), maxRetries=1
    )
    delivery_id = await trigger(system, system.admin, hook)
    await eventually(lambda: retry_due(system.dsn, delivery_id))
    system.clock.advance(timedelta(seconds=10))
    d = await finished(system, system.admin, delivery_id)
    assert (d["status"], d["attempt"], d["trigger"]) == ("success", 2, "MANUAL")
    assert [c.body["trigger"] for c in system.agent.at("f")] == ["manual", "retry"]  # on the wire
    _, body = await system.graphql(
        system.admin,
        """query($id: Int!) { cronWebhookDelivery(id: $id) {
        attempts { attempt logsExpired requestBody } } }""",
        {"id": delivery_id},
    )
    attempts = body["data"]["cronWebhookDelivery"]["attempts"]
    assert [(a["attempt"], a["logsExpired"]) for a in attempts] == [(1, False), (2, False)]
    assert all(a["requestBody"] for a in attempts)
