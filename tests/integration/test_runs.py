"""Runs of asynchronous agents (CONTRACT §16.2) on the running services, with a real agent
on loopback that answers 202 and reports through the token API: how a run starts, what
its report and heartbeats answer, how it ends (reported or timed out), and what its end
means for the webhook's health."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from tests.support import token_api
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, events_of, fetchval, finished, trigger
from tests.support.inprocess import eventually
from tests.support.runs import (
    AsyncAgent,
    heartbeat,
    report,
    run_events,
    run_of,
    run_row,
    run_state,
    start_run,
)
from tests.support.system import System


@pytest.fixture
def runner(agent: Agent) -> AsyncAgent:
    return AsyncAgent(agent)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def shown_failures(system: System, hook_id: int) -> int:
    """consecutiveFailures as GraphQL shows it."""
    _, body = await system.graphql(
        system.admin,
        "query($id: Int!) { cronWebhook(id: $id) { consecutiveFailures } }",
        {"id": hook_id},
    )
    assert "errors" not in body, body
    return int(body["data"]["cronWebhook"]["consecutiveFailures"])


async def failures(system: System, hook_id: int) -> int:
    """The dispatcher's count (auto-disable, alerts)."""
    return int(
        await fetchval(
            system.dsn,
            "select coalesce((select consecutive_failures from dispatcher.webhook_health"
            " where webhook_id = $1), 0)",
            hook_id,
        )
    )


async def test_a_202_to_a_request_with_a_token_starts_a_run_that_its_report_ends(
    system: System, runner: AsyncAgent
) -> None:
    runner.body = {"status": "accepted", "costs": {"tokens": 10}}  # the attempt's (§16.1)
    hook_id, delivery_id, token = await start_run(system, runner)
    started = await run_row(system.dsn, delivery_id)
    assert started is not None and started["state"] == "RUNNING"
    assert started["deadline"] - started["started_at"] == timedelta(seconds=3600)
    d = await finished(system, system.admin, delivery_id)
    assert d["status"] == "success"
    sent = {
        "status": "ok",
        "message": "digest written",
        "costs": {"usd": 0.25, "tokens": 5000},
        "logs": [{"level": "info", "msg": "done", "data": {"notes": 2}}],
    }
    status, body = await report(system, token, sent)
    assert status == 200, body
    assert body["run"]["state"] == "SUCCEEDED"
    assert _at(body["run"]["finished_at"]) == system.clock.now()
    types = [e["type"] for e in await events_of(system.dsn, f"delivery-{delivery_id}")]
    assert types == ["delivery.requested", "delivery.succeeded", "run.started", "run.finished"]
    [start, end] = await run_events(system.dsn, delivery_id)
    assert start["data"]["state"] == "RUNNING" and start["data"]["attempt"] == 1
    assert end["data"]["state"] == "SUCCEEDED" and end["data"]["cause"] == "report"
    follows = await fetchval(
        system.dsn,
        "select f.causation_id = s.event_id and f.correlation_id = s.correlation_id"
        " from eventstore.events s join eventstore.events f on f.stream = s.stream"
        " where s.stream = $1 and s.type = 'run.started' and f.type = 'run.finished'",
        f"delivery-{delivery_id}",
    )
    assert follows  # the end follows the start, in the delivery's correlation chain
    assert end["data"]["costs"] == [
        {"unit": "usd", "amount": 0.25},
        {"unit": "tokens", "amount": 5000},
    ]
    row = await run_row(system.dsn, delivery_id)
    assert row is not None and row["message"] == "digest written"
    assert row["logs"] == [{"ts": None, "level": "info", "msg": "done", "data": {"notes": 2}}]
    # the run's costs count on the day reported, with the attempt's
    spent = await fetchval(
        system.dsn,
        "select jsonb_object_agg(unit, amount)::text from shared.daily_costs where webhook_id = $1",
        hook_id,
    )
    assert json.loads(spent) == {"tokens": 5010, "usd": 0.25}
    _, shown = await system.graphql(
        system.admin,
        "query($id: Int!) { cronWebhook(id: $id) { costTotals { unit amount } } }",
        {"id": hook_id},
    )
    assert shown["data"]["cronWebhook"]["costTotals"] == [
        {"unit": "tokens", "amount": 5010},
        {"unit": "usd", "amount": 0.25},
    ]
    # the same report again: the same answer; another: 409; a heartbeat: 409
    assert await report(system, token, dict(reversed(list(sent.items())))) == (200, body)
    status, _ = await report(system, token, {**sent, "message": "again"})
    assert status == 409
    assert (await heartbeat(system, token))[0] == 409
    assert len(await run_events(system.dsn, delivery_id)) == 2


async def test_a_202_without_a_token_is_a_success_and_starts_no_run(
    system: System, runner: AsyncAgent
) -> None:
    hook_id, _ = await create_webhook(system, system.admin, runner.url)
    delivery_id = await trigger(system, system.admin, hook_id)
    assert (await finished(system, system.admin, delivery_id))["status"] == "success"
    assert await run_row(system.dsn, delivery_id) is None
    assert await run_events(system.dsn, delivery_id) == []


@pytest.mark.system(settings={"alert_after": 1})
async def test_an_error_report_fails_the_run_and_counts_as_a_failed_delivery(
    system: System, runner: AsyncAgent
) -> None:
    hook_id, _, token = await start_run(system, runner)
    assert await failures(system, hook_id) == 0  # a running run is not counted yet
    assert await shown_failures(system, hook_id) == 0  # (its 202 was a success, not a failure)
    status, body = await report(system, token, {"status": "error", "message": "no data"})
    assert status == 200 and body["run"]["state"] == "FAILED", body
    await eventually(lambda: _failures_are(system, hook_id, 1))
    assert await shown_failures(system, hook_id) == 1

    async def raised() -> list[Any]:
        rows = await _alerts(system.dsn)
        return [r for r in rows if r["type"] == "alert.raised"]

    [alert] = await eventually(raised)
    data = json.loads(alert["data"])
    assert data["last_error"] == "no data" and data["webhook_id"] == hook_id
    # a run that succeeds resets the count and resolves the alert
    _, token = await run_of(system, runner, hook_id)
    assert (await report(system, token, {"status": "ok"}))[0] == 200
    await eventually(lambda: _failures_are(system, hook_id, 0))
    assert await shown_failures(system, hook_id) == 0

    async def resolved() -> bool:
        return any(r["type"] == "alert.resolved" for r in await _alerts(system.dsn))

    await eventually(resolved)


async def _failures_are(system: System, hook_id: int, count: int) -> bool:
    return await failures(system, hook_id) == count


async def _alerts(dsn: str) -> list[Any]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(
            await conn.fetch(
                "select type, data from eventstore.events where type like 'alert.%'"
                " order by position"
            )
        )
    finally:
        await conn.close()


async def test_heartbeats_move_the_deadline_never_past_a_day_and_keep_their_logs(
    system: System, runner: AsyncAgent
) -> None:
    _, delivery_id, token = await start_run(system, runner)
    row = await run_row(system.dsn, delivery_id)
    assert row is not None
    started = row["started_at"]
    system.clock.advance(timedelta(minutes=50))
    status, body = await heartbeat(system, token, {"logs": [{"level": "info", "msg": "half"}]})
    assert status == 200, body
    assert _at(body["deadline"]) == system.clock.now() + timedelta(hours=1)
    assert (await heartbeat(system, token))[0] == 200  # no body: the deadline only
    for _ in range(27):  # a beat every 50 minutes: at 23 h 20 min the deadline stops at 24 h
        system.clock.advance(timedelta(minutes=50))
        status, body = await heartbeat(system, token, {"logs": [{"level": "debug", "msg": "x"}]})
        assert status == 200, body
    assert _at(body["deadline"]) == started + timedelta(hours=24)
    row = await run_row(system.dsn, delivery_id)
    assert row is not None and row["state"] == "RUNNING"
    assert row["deadline"] == started + timedelta(hours=24)
    assert row["log_count"] == 28 and row["logs"][0]["msg"] == "half"
    # the token expired long ago: while its run is RUNNING, these two take it; notes don't
    assert (await token_api.call(system, "GET", "/api/notes", token))[0] == 401
    status, body = await report(system, token, {"status": "ok", "logs": "not an array"})
    assert status == 200, body
    row = await run_row(system.dsn, delivery_id)
    assert row is not None
    assert row["logs"][-1]["msg"] == "logs dropped: must be an array, not a string"
    # finished, an expired token is refused
    assert (await report(system, token, {"status": "ok", "logs": "not an array"}))[0] == 401


async def test_a_run_without_a_report_times_out_at_its_deadline(
    system: System, runner: AsyncAgent
) -> None:
    hook_id, delivery_id, token = await start_run(system, runner)
    row = await run_row(system.dsn, delivery_id)
    assert row is not None
    system.clock.set(row["deadline"] - timedelta(seconds=1))
    await_time = datetime.now(UTC)
    system.clock.set(row["deadline"] + timedelta(milliseconds=1))
    ended = await run_state(system.dsn, delivery_id, "TIMED_OUT", timeout=5)
    assert datetime.now(UTC) - await_time < timedelta(seconds=5)
    assert ended["finished_at"] == row["deadline"]
    assert ended["message"] == "no report by the deadline"
    [_, end] = await run_events(system.dsn, delivery_id)
    assert end["data"]["cause"] == "timeout" and end["data"]["state"] == "TIMED_OUT"
    await eventually(lambda: _failures_are(system, hook_id, 1))
    assert await shown_failures(system, hook_id) == 1
    assert (await report(system, token, {"status": "ok"}))[0] == 401  # expired, finished
    assert len(await run_events(system.dsn, delivery_id)) == 2


async def test_what_the_report_endpoint_answers(system: System, runner: AsyncAgent) -> None:
    _, delivery_id, token = await start_run(system, runner)
    assert (await report(system, None, {"status": "ok"}))[0] == 401
    assert (await report(system, token[:-2] + "xx", {"status": "ok"}))[0] == 401  # forged
    header, claims, signature = token.split(".")
    tampered = f"{header}.{claims[:-3]}abc.{signature}"
    assert (await report(system, tampered, {"status": "ok"}))[0] == 401
    for bad in ({}, {"status": "done"}, {"status": None}, ["ok"]):
        status, body = await report(system, token, bad)
        assert status == 400, (bad, body)
    status, body = await report(system, token, {"status": "finished"})
    assert body["field"] == "status" and "status" in body["error"]
    status, body = await report(system, token, raw=b"{not json")
    assert status == 400
    assert (await report(system, token, raw=b"[" * 65 + b"]" * 65))[0] == 400
    assert (await run_row(system.dsn, delivery_id) or {})["state"] == "RUNNING"
    # a token whose delivery has no run: 404 (after a short wait for one)
    open_id = await token_api.open_webhook(system, system.admin)
    other = token_api.mint(system.settings, now=system.clock.now(), webhook_id=open_id)
    assert (await report(system, other, {"status": "ok"}))[0] == 404
    assert (await heartbeat(system, other))[0] == 404


async def test_the_sdk_heartbeats_and_reports_a_run(system: System, runner: AsyncAgent) -> None:
    from cronhooks_agent import AuthRejected, Run, RunFinished, RunReport

    _, delivery_id, token = await start_run(system, runner)
    run = Run(system.urls["importer"], token)
    system.clock.advance(timedelta(minutes=10))
    deadline = await run.heartbeat([{"level": "info", "msg": "working"}])
    assert deadline == system.clock.now() + timedelta(hours=1)
    done = RunReport().cost("usd", 0.5).log("info", "written", data={"notes": 1})
    ended = await run.report(done)
    assert ended["state"] == "SUCCEEDED"
    assert await run.report(done) == ended  # the same report again
    with pytest.raises(RunFinished):
        await run.report(RunReport("error", "late"))
    row = await run_row(system.dsn, delivery_id)
    assert row is not None and [e["msg"] for e in row["logs"]] == ["working", "written"]
    with pytest.raises(AuthRejected):
        await Run(system.urls["importer"], token + "x").heartbeat()


# tokens that outlive the runs: a late report is judged by its run (an expired token whose
# run has ended is a 401, test_heartbeats_...)
@pytest.mark.system(settings={"api_token_ttl_seconds": 7200})
async def test_reports_racing_the_timeout_sweep_end_each_run_once(
    system: System, runner: AsyncAgent
) -> None:
    hook_id, first, token = await start_run(system, runner)
    started = [(first, token)]
    for _ in range(5):
        system.clock.advance(timedelta(seconds=1))
        started.append(await run_of(system, runner, hook_id))
    rows = [await run_row(system.dsn, d) for d, _ in started]
    deadlines = [r["deadline"] for r in rows if r is not None]
    system.clock.set(deadlines[2])  # the first three are due: the sweep takes them meanwhile
    answers = await asyncio.gather(*(report(system, t, {"status": "ok"}) for _, t in started))
    assert [code for code, _ in answers] == [409] * 3 + [200] * 3, answers
    for (delivery_id, _), (code, _) in zip(started, answers, strict=True):
        row = await run_row(system.dsn, delivery_id)
        assert row is not None
        assert row["state"] == ("TIMED_OUT" if code == 409 else "SUCCEEDED")
        assert len(await run_events(system.dsn, delivery_id)) == 2  # started, one end


async def test_a_report_sent_before_the_202_is_recorded_waits_for_its_run(
    system: System, agent: Agent
) -> None:
    sent: list[asyncio.Task[tuple[int, Any]]] = []

    async def eager(_: web.Request, got: Received) -> web.StreamResponse:
        # the agent reports at once, before it answers: the dispatcher has not recorded
        # the 202 (nor the run) when the report comes
        token = got.body["api_token"]
        sent.append(asyncio.create_task(report(system, token, {"status": "ok"})))
        await asyncio.sleep(0.2)
        return web.json_response({"status": "accepted"}, status=202)

    hook_id, _ = await create_webhook(
        system, system.admin, agent.url_for("eager", eager), passApiKey=True
    )
    delivery_id = await trigger(system, system.admin, hook_id)
    await eventually(lambda: _sent(sent))
    status, body = await sent[0]
    assert status == 200 and body["run"]["state"] == "SUCCEEDED", body
    assert (await run_row(system.dsn, delivery_id) or {})["state"] == "SUCCEEDED"


async def _sent(tasks: list[Any]) -> bool:
    return bool(tasks)
