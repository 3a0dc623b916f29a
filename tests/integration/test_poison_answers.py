"""Finding 1 of the 2026-12-06 review (CONTRACT §15, "nothing an agent answers can wedge
anything"): answers that used to raise in the dispatcher — JSON nested 500 levels deep, a
`Retry-After` of 15 digits, `²` or 5,000 digits — left the delivery pending with no
attempt, its execution group and its FORBID webhook blocked for good, and a fire armed
for ever. Each now ends as a failed attempt with a reason, retried and counted as usual.
Real services in-process, a real agent on loopback."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from tests.support.agent import Received
from tests.support.flows import (
    create_webhook,
    delivery,
    finished,
    provision_now,
    retry_due,
    trigger,
    trigger_ended,
)
from tests.support.inprocess import eventually
from tests.support.system import System

NESTED_500 = b'{"status":"ok","changes":' + b"[" * 499 + b"]" * 499 + b"}"  # ~1 KB
HOUR = timedelta(hours=1)


def answer(status: int, body: bytes = b"", headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=status, body=body, headers=headers)

    return respond


async def test_an_answer_nested_500_levels_fails_its_attempt_and_frees_its_group(
    system: System,
) -> None:
    poison, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("deep", answer(200, NESTED_500)),
        executionGroup="g",
    )
    after, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("fine", answer(200, b'{"status":"ok"}')),
        executionGroup="g",
    )
    first = await trigger(system, system.admin, poison)
    second = await trigger(system, system.admin, after)  # joins the group behind the first
    failed = await finished(system, system.admin, first)
    assert failed["status"] == "failed"
    assert failed["error"] == "answer nested deeper than 64 levels"
    assert [a["errorMessage"] for a in failed["attempts"]] == [
        "answer nested deeper than 64 levels"
    ]
    assert (await finished(system, system.admin, second))["status"] == "success"
    assert len(system.agent.at("fine")) == 1


async def test_a_poison_answer_does_not_make_forbid_skip_later_slots(system: System) -> None:
    hook, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("deep", answer(200, NESTED_500)),
        cronSchedule="* * * * *",
        concurrencyPolicy="FORBID",
    )
    manual = await trigger(system, system.admin, hook)  # holds FORBID's pending row while it runs
    assert (await finished(system, system.admin, manual))["status"] == "failed"
    system.clock.set(system.clock.now().replace(second=0) + timedelta(minutes=1, seconds=1))
    await system.agent.wait_for(2, name="deep")  # the slot went out: not skipped as still pending

    async def slot_outcome() -> str | None:
        _, body = await system.graphql(
            system.admin,
            "query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id) { trigger status error } }",
            {"id": hook},
        )
        slots = [d for d in body["data"]["cronWebhookDeliveries"] if d["trigger"] == "SCHEDULE"]
        return slots[0]["error"] if slots and slots[0]["status"] != "pending" else None

    assert await eventually(slot_outcome) == "answer nested deeper than 64 levels"


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("999999999999999", HOUR),  # overflowed timedelta
        ("9" * 5000, HOUR),  # beyond int()'s digit limit
        ("²", timedelta(seconds=10)),  # passed isdigit(), failed int(): the usual backoff
        ("-30", timedelta(seconds=10)),
        ("7200", HOUR),  # within the old day-long cap: now an hour at most
        ("120", timedelta(seconds=120)),
    ],
)
async def test_any_retry_after_schedules_a_retry_within_the_hour(
    system: System, header: str, wait: timedelta
) -> None:
    url = system.agent.url_for("busy", answer(503, b"busy", {"Retry-After": header}))
    hook, _ = await create_webhook(system, system.admin, url, maxRetries=1)
    delivery_id = await trigger(system, system.admin, hook)

    async def waiting() -> dict[str, Any] | None:
        d = await delivery(system, system.admin, delivery_id)
        return d if d["nextAttemptAt"] else None

    d = await eventually(waiting)
    assert d["status"] == "pending"
    assert [(a["responseStatus"], a["errorMessage"]) for a in d["attempts"]] == [
        (503, "HTTP 503: busy")
    ]
    due = datetime.fromisoformat(d["nextAttemptAt"])
    assert due == system.clock.now() + wait
    # The scheduler keeps the retry timer; admin-api shows nextAttemptAt: each from the
    # same event, neither waits for the other
    assert await eventually(lambda: retry_due(system.dsn, delivery_id)) == due
    # The retry happens when it is due; then nothing is scheduled any more.
    system.clock.set(due)
    await system.agent.wait_for(2, name="busy")
    await finished(system, system.admin, delivery_id)
    done = await delivery(system, system.admin, delivery_id)
    assert (done["status"], done["attempt"], done["nextAttemptAt"]) == ("failed", 2, None)


@pytest.mark.parametrize(
    "header", ["999999999999999", "²", "9" * 5000, "Fri, 01 Jan 9999 00:00:00 GMT"]
)
async def test_a_fire_answered_with_any_retry_after_is_retried_or_ends_failed(
    system: System, header: str
) -> None:
    """A fire's retry that would start more than 15 minutes after fire_at is not made: the
    trigger leaves `armed` at once, failed, saying why; one within the window is retried."""
    system.agent.url_for("cb/api/cron/fire", answer(503, b"", {"Retry-After": header}))
    callback = f"http://127.0.0.1:{system.agent.port}/cb"
    agent_id = await provision_now(system, system.admin, callback, system.clock.now().isoformat())
    await system.agent.wait_for(1, name="cb/api/cron/fire")

    if header == "²":  # unreadable: the usual backoff (2 s), well inside the window
        await asyncio.sleep(0.3)
        assert len(system.agent.at("cb/api/cron/fire")) == 1
        system.clock.advance(timedelta(seconds=2))
        await system.agent.wait_for(2, name="cb/api/cron/fire")
        return
    job = await trigger_ended(system, system.admin, agent_id)
    assert job["state"] == "failed" and job["lastOutcome"] == "failed"
    assert job["lastError"] == (
        "HTTP 503; not retried: the next attempt would start more than 15 minutes after fire_at"
    )
