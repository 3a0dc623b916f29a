"""CONTRACT §16.1 on the running services, with a real agent on loopback: what an answer
reports it cost and logged is recorded with its attempt — whatever its HTTP status, its
`status` field or the importer's verdict on its changes — and shown by GraphQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aiohttp import web

from tests.support.agent import Received
from tests.support.flows import create_webhook, finished, retry_due, trigger
from tests.support.inprocess import eventually
from tests.support.system import System

REPORTED = """
query($id: Int!) { cronWebhookDelivery(id: $id) {
  status error costs { unit amount }
  attempts { attempt responseStatus costs { unit amount } agentLogs { ts level msg data } }
} }
"""
DROP_NOTE = "{n} further log entries dropped: over the 500-entry / 65536-byte limit"


def answer(code: int, payload: object):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response(payload, status=code)

    return respond


async def reported(system: System, delivery_id: int) -> dict[str, Any]:
    await finished(system, system.admin, delivery_id)
    _, body = await system.graphql(system.admin, REPORTED, {"id": delivery_id})
    assert "errors" not in body, body
    return body["data"]["cronWebhookDelivery"]  # type: ignore[no-any-return]


async def test_an_answers_costs_and_logs_are_shown_per_attempt_and_summed(
    system: System,
) -> None:
    answers = iter(
        [
            # a failed attempt (HTTP 500 with a JSON body) still records them
            answer(
                500,
                {
                    "error": "model overloaded",
                    "costs": {"tokens": 1000, "usd": 0.25, "bad unit": 3, "eur": -1},
                    "logs": [
                        {"ts": "2026-02-09T10:00:00+01:00", "level": "error", "msg": "overload"},
                        "not an entry",
                    ],
                },
            ),
            answer(
                200,
                {
                    "status": "ok",
                    "message": "done",
                    "costs": {"usd": 0.5, "tokens": 5186},
                    "logs": [
                        {"level": "info", "msg": "start", "data": {"notes": 3, "ok": [True]}},
                        *({"level": "debug", "msg": str(i)} for i in range(501)),
                    ],
                },
            ),
        ]
    )

    async def agent(request: web.Request, entry: Received) -> web.StreamResponse:
        return await next(answers)(request, entry)

    hook_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for("costly", agent), maxRetries=1
    )
    delivery_id = await trigger(system, system.admin, hook_id)
    await eventually(lambda: retry_due(system.dsn, delivery_id))
    system.clock.advance(timedelta(seconds=10))
    d = await reported(system, delivery_id)

    assert d["status"] == "success"
    first, second = d["attempts"]
    assert first["responseStatus"] == 500
    assert first["costs"] == [{"unit": "tokens", "amount": 1000}, {"unit": "usd", "amount": 0.25}]
    assert first["agentLogs"] == [
        {"ts": "2026-02-09T09:00:00.000Z", "level": "error", "msg": "overload", "data": None},
        {
            "ts": None,
            "level": "warn",
            "msg": "logs[1] dropped: an entry must be an object, not a string",
            "data": None,
        },
        {
            "ts": None,
            "level": "warn",
            "msg": 'costs["bad unit"] dropped: unit names are 1-64 characters of [A-Za-z0-9_.:-]',
            "data": None,
        },
        {
            "ts": None,
            "level": "warn",
            "msg": 'costs["eur"] dropped: amount must be a finite number >= 0',
            "data": None,
        },
    ]
    assert second["costs"] == [{"unit": "usd", "amount": 0.5}, {"unit": "tokens", "amount": 5186}]
    logs = second["agentLogs"]
    assert logs[0] == {
        "ts": None,
        "level": "info",
        "msg": "start",
        "data": {"notes": 3, "ok": [True]},
    }
    assert [e["msg"] for e in logs[1:500]] == [str(i) for i in range(499)]
    assert logs[500:] == [{"ts": None, "level": "warn", "msg": DROP_NOTE.format(n=2), "data": None}]
    # the delivery's costs: its attempts' summed per unit, units sorted
    assert d["costs"] == [{"unit": "tokens", "amount": 6186}, {"unit": "usd", "amount": 0.75}]


async def test_costs_and_logs_are_recorded_for_failed_answers_of_every_kind(
    system: System,
) -> None:
    report = {
        "costs": {"tokens": 7},
        "logs": [{"ts": "2026-02-09T09:00:00Z", "level": "info", "msg": "tried"}],
    }
    shown_costs = [{"unit": "tokens", "amount": 7}]
    shown_logs = [{"ts": "2026-02-09T09:00:00.000Z", "level": "info", "msg": "tried", "data": None}]
    cases = {
        "error-status": answer(200, {"status": "error", "message": "no data", **report}),
        "rejected": answer(
            200,
            {"status": "ok", "changes": [{"path": "secret/x.md", "content": "X"}], **report},
        ),
        "imported": answer(
            200,
            {"status": "ok", "changes": [{"path": "digests/y.md", "content": "Y"}], **report},
        ),
        "server-error": answer(503, report),
    }
    for name, respond in cases.items():
        hook_id, _ = await create_webhook(
            system,
            system.admin,
            system.agent.url_for(name, respond),
            writePatterns=["digests/*"],
            maxRetries=0,
        )
        d = await reported(system, await trigger(system, system.admin, hook_id))
        assert d["status"] == ("success" if name == "imported" else "failed"), (name, d)
        [attempt] = d["attempts"]
        assert attempt["costs"] == shown_costs, name
        assert attempt["agentLogs"] == shown_logs, name
        assert d["costs"] == shown_costs, name


async def test_answers_without_costs_and_logs_show_empty_lists(system: System) -> None:
    hook_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for("plain", answer(200, {"status": "ok"}))
    )
    d = await reported(system, await trigger(system, system.admin, hook_id))
    assert d["costs"] == [] and d["attempts"][0]["costs"] == []
    assert d["attempts"][0]["agentLogs"] == []
