"""Destination limits (CONTRACT §17) on the running services with real agents on loopback:
a limit of 2 holds ten slow deliveries to two in flight, in request order; a delivery
waiting its turn past the watchdog's deadline is not abandoned; a Retry-After hold from
one webhook's 429 delays the other webhooks' deliveries to that destination and not those
to another; setDestinationLimit's validation and its event."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from aiohttp import web

from cronhooks_common.events import EventType, destination_stream
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, fetchval, finished, trigger
from tests.support.inprocess import eventually
from tests.support.system import System

SET_LIMIT = """
mutation ($d: String!, $c: Int, $r: Float) {
  setDestinationLimit(destination: $d, maxConcurrent: $c, maxPerSecond: $r) {
    destination maxConcurrent maxPerSecond
  }
}
"""
# The dispatchers read the limits every half second.
APPLIED = 1.2


def destination_of(agent: Agent) -> str:
    return f"http://127.0.0.1:{agent.port}"


async def set_limit(system: System, d: str, **limits: Any) -> dict[str, Any]:
    _, body = await system.graphql(system.admin, SET_LIMIT, {"d": d, **limits})
    return body  # type: ignore[no-any-return]


async def test_a_limit_of_two_keeps_two_in_flight_in_request_order(system: System) -> None:
    in_flight = peak = 0
    go = asyncio.Event()  # the first two are answered once the other eight wait

    async def slow(_: web.Request, __: Received) -> web.StreamResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await go.wait()
        await asyncio.sleep(0.25)
        in_flight -= 1
        return web.json_response({"status": "ok"})

    url = system.agent.url_for("slow", slow)
    body = await set_limit(system, url, c=2)
    assert body["data"]["setDestinationLimit"] == {
        "destination": destination_of(system.agent),
        "maxConcurrent": 2,
        "maxPerSecond": None,
    }
    await asyncio.sleep(APPLIED)
    hook, _ = await create_webhook(system, system.admin, url, maxRetries=0)
    try:
        ids = [await trigger(system, system.admin, hook) for _ in range(10)]
        assert await eventually(lambda: _eight_waiting(system))
    finally:
        go.set()  # a failed check must not leave requests open at the stop
    for delivery_id in ids:
        assert (await finished(system, system.admin, delivery_id, timeout=30))["status"] == (
            "success"
        )
    arrived = [int(r.headers["webhook-id"]) for r in system.agent.at("slow")]
    # All ten, once each. The first two to reach the gate went at once: which two depends
    # on the lookups before it, not on the order (a request that has not reached the gate
    # does not wait). The eight that waited went in the order they were requested, whatever
    # order they reached the gate in; two go at a time, so two that start together may
    # reach the agent either way round: none arrives more than one place from its turn.
    assert sorted(arrived) == ids
    waited = [d for d in ids if d not in arrived[:2]]
    assert all(abs(place - waited.index(d)) <= 1 for place, d in enumerate(arrived[2:])), arrived
    assert peak == 2


async def _eight_waiting(system: System) -> bool:
    _, got = await system.graphql(system.admin, "{ destinationWaiting { waiting } }")
    return sum(row["waiting"] for row in got["data"]["destinationWaiting"]) == 8


async def test_a_delivery_waiting_its_turn_past_the_watchdogs_deadline_is_not_abandoned(
    system: System,
) -> None:
    answer = asyncio.Event()

    async def stuck(_: web.Request, __: Received) -> web.StreamResponse:
        await answer.wait()
        return web.json_response({"status": "ok"})

    url = system.agent.url_for("stuck", stuck)
    await set_limit(system, url, c=1)
    await asyncio.sleep(APPLIED)
    hook, _ = await create_webhook(system, system.admin, url, maxRetries=0)
    try:
        await _waiting_its_turn(system, hook, answer)
    finally:
        answer.set()  # a failed check must not leave a request open at the stop


async def _waiting_its_turn(system: System, hook: int, answer: asyncio.Event) -> None:
    sent = await trigger(system, system.admin, hook)
    await system.agent.wait_for(1, name="stuck")
    waits = await trigger(system, system.admin, hook)

    async def waiting() -> list[dict[str, Any]]:
        query = "{ destinationWaiting { destination waiting } }"
        _, got = await system.graphql(system.admin, query)
        return got["data"]["destinationWaiting"]  # type: ignore[no-any-return]

    one = [{"destination": destination_of(system.agent), "waiting": 1}]
    assert await eventually(waiting) == one
    # Held half a minute (before any watchdog deadline: a timeout + 60 s), both are told by
    # id as held long (one sent, one waiting); five minutes on, far past those deadlines,
    # the watchdog moves their deadlines on instead of abandoning them. (Time moves in
    # steps here: the dispatcher tells every half second of real time.)
    system.clock.advance(timedelta(seconds=30))

    async def told_long() -> bool:
        told = (
            "select array_agg(i order by i) from shared.destination_waiting, unnest(long_waits) i"
        )
        return await fetchval(system.dsn, told) == sorted([sent, waits])

    await eventually(told_long)
    system.clock.advance(timedelta(seconds=270))
    system.services["scheduler"].watchdog.wake()
    await asyncio.sleep(1.0)
    assert [(await _delivery(system, d))["status"] for d in (sent, waits)] == ["pending"] * 2
    answer.set()
    for delivery_id in (sent, waits):
        assert (await finished(system, system.admin, delivery_id))["status"] == "success"
    assert len(system.agent.at("stuck")) == 2

    async def none_waits() -> bool:
        return await waiting() == []

    await eventually(none_waits)


async def test_a_retry_after_holds_the_destination_not_others(system: System) -> None:
    other = await Agent().start()
    try:
        first = True

        async def busy(_: web.Request, __: Received) -> web.StreamResponse:
            nonlocal first
            if first:
                first = False
                return web.Response(status=429, headers={"Retry-After": "600"})
            return web.json_response({"status": "ok"})

        held_hook, _ = await create_webhook(
            system, system.admin, system.agent.url_for("busy", busy), maxRetries=1
        )
        same_hook, _ = await create_webhook(
            system, system.admin, system.agent.url_for("same", _ok), maxRetries=0
        )
        other_hook, _ = await create_webhook(
            system, system.admin, other.url_for("other", _ok), maxRetries=0
        )
        got_429 = await trigger(system, system.admin, held_hook)
        await system.agent.wait_for(1, name="busy")

        async def holds() -> list[dict[str, Any]]:  # written just after the 429 came back
            _, got = await system.graphql(
                system.admin, "{ destinationHolds { destination heldUntil } }"
            )
            return got["data"]["destinationHolds"]  # type: ignore[no-any-return]

        [hold] = await eventually(holds)
        assert hold["destination"] == destination_of(system.agent)

        waits = await trigger(system, system.admin, same_hook)
        elsewhere = await trigger(system, system.admin, other_hook)
        assert (await finished(system, system.admin, elsewhere))["status"] == "success"
        await asyncio.sleep(0.5)
        assert system.agent.at("same") == []  # held: it waits, it does not fail
        pending = await _delivery(system, waits)
        assert pending["status"] == "pending" and pending["attempts"] == []

        # Past the watchdog's deadline for a request (its timeout + 60 s), the hold still
        # on: the waiting delivery is not abandoned (it waits, it does not fail)
        system.clock.advance(timedelta(seconds=300))
        system.services["scheduler"].watchdog.wake()
        await asyncio.sleep(1.0)
        assert (await _delivery(system, waits))["status"] == "pending"
        system.clock.advance(timedelta(seconds=300))
        assert (await finished(system, system.admin, waits))["status"] == "success"
        done = await finished(system, system.admin, got_429)
        # only the attempt that got the 429 failed
        assert [a["responseStatus"] for a in done["attempts"]] == [429, 200]
        assert len(system.agent.at("same")) == 1
    finally:
        await other.stop()


async def test_set_destination_limit_checks_its_arguments(system: System) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"d": "https://a.example", "c": 0}, "maxConcurrent"),
        ({"d": "https://a.example", "c": 10_001}, "maxConcurrent"),
        ({"d": "https://a.example", "c": -3}, "maxConcurrent"),
        ({"d": "https://a.example", "r": 0.0}, "maxPerSecond"),
        ({"d": "https://a.example", "r": -1.5}, "maxPerSecond"),
        ({"d": "ftp://a.example"}, "destination"),
        ({"d": "a.example"}, "destination"),
        ({"d": "https://a.example:99999"}, "destination"),
        ({"d": ""}, "destination"),
    ]
    for variables, field in cases:
        body = await set_limit(system, **variables)
        assert body["data"] is None, (variables, body)
        [error] = body["errors"]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": field}, variables

    ok = await set_limit(system, "HTTPS://A.Example/hook?x=1", c=10_000, r=0.5)
    expected = {
        "destination": "https://a.example:443",
        "maxConcurrent": 10_000,
        "maxPerSecond": 0.5,
    }
    assert ok["data"]["setDestinationLimit"] == expected
    rate_only = await set_limit(system, "http://b.example:8080", r=3)
    assert rate_only["data"]["setDestinationLimit"]["maxConcurrent"] is None
    _, listed = await system.graphql(
        system.admin, "{ destinationLimits { destination maxConcurrent maxPerSecond } }"
    )
    assert [d["destination"] for d in listed["data"]["destinationLimits"]] == [
        "http://b.example:8080",
        "https://a.example:443",
    ]
    removed = await set_limit(system, "https://a.example:443")
    assert removed["data"]["setDestinationLimit"]["maxConcurrent"] is None
    _, listed = await system.graphql(system.admin, "{ destinationLimits { destination } }")
    assert listed["data"]["destinationLimits"] == [{"destination": "http://b.example:8080"}]

    events = await events_of(system.dsn, destination_stream("https://a.example:443"))
    assert [e["type"] for e in events] == [EventType.DESTINATION_LIMIT_SET] * 2


async def _ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


async def _delivery(system: System, delivery_id: int) -> dict[str, Any]:
    _, body = await system.graphql(
        system.admin,
        "query ($id: Int!) { cronWebhookDelivery(id: $id) { status attempts { attempt } } }",
        {"id": delivery_id},
    )
    return body["data"]["cronWebhookDelivery"]  # type: ignore[no-any-return]
