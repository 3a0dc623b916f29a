"""CONTRACT §16.2, the pure parts of runs: a report's body judged (run_reports.py), a
run's logs grown by heartbeats and its report under 16.1's limits for the whole run
(run_logs.py), where a heartbeat moves the deadline (24 h cap), and when an attempt starts
a run (the dispatcher's runs.started)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronhooks_common.clock import iso
from cronhooks_common.events import (
    AgentLog,
    CostAmount,
    DeliveryRequested,
    NewEvent,
    Target,
)
from cronhooks_dispatcher import runs as dispatcher_runs
from cronhooks_dispatcher.attempt import Attempt
from cronhooks_dispatcher.outcome import Outcome
from cronhooks_dispatcher.record import finished
from cronhooks_importer.run_logs import RunLogs, append_to_run
from cronhooks_importer.run_reports import (
    BadReport,
    digest,
    heartbeat_logs,
    moved_deadline,
    report_of,
)

DROP_NOTE = "{n} further log entries dropped: over the 500-entry / 65536-byte limit"
T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def entry(msg: str, **more: Any) -> dict[str, Any]:
    return {"level": "info", "msg": msg, **more}


# --- the report's body -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "status"),
        ({"status": "done"}, "status"),
        ({"status": None}, "status"),
        ({"status": 1}, "status"),
        ({"status": "OK"}, "status"),
        (["ok"], "body"),
        ("ok", "body"),
        ({"status": "ok", "message": 3}, "message"),
    ],
)
def test_a_body_without_a_valid_status_is_refused_naming_the_field(body: Any, field: str) -> None:
    with pytest.raises(BadReport) as refused:
        report_of(body)
    assert refused.value.field == field and str(refused.value).startswith(field)


def test_ok_succeeds_and_error_fails() -> None:
    assert report_of({"status": "ok"}).state == "SUCCEEDED"
    failed = report_of({"status": "error", "message": "no data"})
    assert failed.state == "FAILED" and failed.message == "no data"


def test_the_same_report_has_the_same_digest_whatever_its_key_order_or_spacing() -> None:
    a = {"status": "ok", "message": "m", "costs": {"usd": 1, "tokens": 2}, "logs": [entry("x")]}
    b = json.loads(json.dumps(dict(reversed(list(a.items()))), indent=3))
    assert report_of(a).digest == report_of(b).digest
    assert report_of(a).digest != report_of({**a, "message": "n"}).digest
    assert report_of(a).digest != report_of({**a, "costs": {"usd": 1, "tokens": 3}}).digest
    # absent and null are the same report; anything json can hold is digested
    assert report_of({"status": "ok"}).digest == report_of({"status": "ok", "logs": None}).digest
    assert digest("ok", "\ud800", float("nan"), [{"a": [[[]]]}])


def test_a_long_message_is_cut_and_stored_safely() -> None:
    report = report_of({"status": "error", "message": "x\x00" * 5000})
    assert report.message is not None and len(report.message) == 4001
    assert "\x00" not in report.message and report.message.endswith("…")


def test_a_heartbeats_body_is_optional() -> None:
    assert heartbeat_logs(None) is None
    assert heartbeat_logs({}) is None
    assert heartbeat_logs({"logs": [entry("a")]}) == [entry("a")]
    with pytest.raises(BadReport):
        heartbeat_logs([entry("a")])


# --- the deadline --------------------------------------------------------------------------


def test_a_heartbeat_moves_the_deadline_to_now_plus_the_timeout_never_past_a_day() -> None:
    assert moved_deadline(T0 + timedelta(minutes=5), T0, 600) == T0 + timedelta(minutes=15)
    assert moved_deadline(T0 + timedelta(hours=23), T0, 3600) == T0 + timedelta(hours=24)
    assert moved_deadline(T0 + timedelta(hours=30), T0, 60) == T0 + timedelta(hours=24)
    assert moved_deadline(T0, T0, 86400) == T0 + timedelta(hours=24)


# --- the run's logs ------------------------------------------------------------------------


def msgs(run: RunLogs) -> list[str]:
    return [e.msg for e in run.entries]


def test_logs_grow_call_by_call_and_costs_are_judged_as_an_answers() -> None:
    run, costs = append_to_run(RunLogs(), [entry("a"), entry("b", ts="2026-12-07T10:00:00+01:00")])
    assert costs == []
    assert run.entries[1] == AgentLog(ts="2026-12-07T09:00:00+00:00", level="info", msg="b")
    assert (run.count, run.dropped, run.warnings) == (2, 0, 0)
    run, costs = append_to_run(run, [entry("c")], {"usd": 0.5, "bad unit": 1, "eur": -1})
    assert costs == [CostAmount(unit="usd", amount=0.5)]
    assert msgs(run)[:3] == ["a", "b", "c"]
    assert msgs(run)[3:] == [
        'costs["bad unit"] dropped: unit names are 1-64 characters of [A-Za-z0-9_.:-]',
        'costs["eur"] dropped: amount must be a finite number >= 0',
    ]
    assert run.warnings == 2 and run.count == 3
    # the byte count is the compact JSON array of the agent's kept entries, exactly
    kept = [
        {"ts": e.ts, "level": e.level, "msg": e.msg, "data": e.data}
        for e in run.entries
        if e.msg in "abc"
    ]
    assert run.size == len(json.dumps(kept, separators=(",", ":")).encode())


def test_the_500_entry_limit_holds_for_the_whole_run_with_one_drop_note_kept_last() -> None:
    run, _ = append_to_run(RunLogs(), [entry(str(i)) for i in range(300)])
    run, _ = append_to_run(run, [entry(str(i)) for i in range(300, 600)])
    assert run.count == 500 and run.dropped == 100
    assert msgs(run)[:500] == [str(i) for i in range(500)]
    assert msgs(run)[500:] == [DROP_NOTE.format(n=100)]
    # later entries are dropped too, counted by the same note, which stays last
    run, _ = append_to_run(run, [entry("late"), "not an entry"])
    assert msgs(run)[500:] == [DROP_NOTE.format(n=102)] and len(run.entries) == 501
    run, _ = append_to_run(run, "not an array")
    assert msgs(run)[-2:] == [
        "logs dropped: must be an array, not a string",
        DROP_NOTE.format(n=102),
    ]


def test_the_byte_limit_holds_for_the_whole_run() -> None:
    big = "x" * 30_000
    run, _ = append_to_run(RunLogs(), [entry(big), entry(big)])
    assert run.count == 2 and run.dropped == 0
    run, _ = append_to_run(run, [entry(big), entry("small")])
    assert run.count == 2 and run.dropped == 2 and run.size <= 65_536
    assert msgs(run)[-1] == DROP_NOTE.format(n=2)


def test_warnings_are_bounded_for_the_whole_run() -> None:
    run = RunLogs()
    for _ in range(50):
        run, _ = append_to_run(run, ["bad"] * 10)
    assert run.warnings == 100 and len(run.entries) == 100  # MAX_NAMED for the run
    run, _ = append_to_run(run, [entry("still kept")])
    assert msgs(run)[-1] == "still kept"


def test_hostile_logs_end_as_cut_entries() -> None:
    deep: Any = "x"
    for _ in range(60):
        deep = [deep]
    hostile = [
        {"level": "info", "msg": "nul\x00"},
        {"level": "info", "msg": "s", "data": float("nan")},
        {"level": "info", "msg": "deep", "data": deep},
        {"level": "info", "msg": "ts", "ts": "yesterday"},
        *([entry("flood")] * 1_000_000),
    ]
    run, _ = append_to_run(RunLogs(), hostile)
    assert run.count == 500 and run.dropped == 1_000_000 - 499
    assert msgs(run)[0] == "deep" and msgs(run)[-1] == DROP_NOTE.format(n=1_000_000 - 499)
    assert run.warnings == 3


# --- when an attempt starts a run (the dispatcher) -----------------------------------------


def request(*, pass_api_key: bool, timeout: int | None = None) -> DeliveryRequested:
    target = Target(
        url="https://agent.example/hook",
        instruction="",
        timeout_seconds=30,
        max_retries=0,
        pass_api_key=pass_api_key,
        read_patterns=[],
        write_patterns=[],
        max_depth=1,
        **({"run_timeout_seconds": timeout} if timeout else {}),
    )
    return DeliveryRequested(
        delivery_id=7,
        webhook_id=3,
        kind="cron",
        attempt=1,
        scheduled_for=None,
        trigger="manual",
        missed_count=0,
        target=target,
    )


def attempt_of(status: int, **kw: Any) -> Attempt:
    return Attempt(request(**kw), T0, "{}", status, "", 5)


def test_a_202_to_a_request_with_a_token_starts_a_run_that_holds_the_lanes() -> None:
    cause: Any = type("Cause", (), {"event_id": None, "stream": "delivery-7", "version": 1})
    ok = Outcome(True)
    record = dispatcher_runs.started(
        finished(cause, attempt_of(202, pass_api_key=True), ok, T0), T0
    )
    assert isinstance(record.then, NewEvent) and record.then.type == "run.started"
    assert record.then.data["deadline"] == iso(T0 + timedelta(hours=1))
    assert record.release is None and record.health is None
    custom = attempt_of(202, pass_api_key=True, timeout=120)
    record = dispatcher_runs.started(finished(cause, custom, ok, T0), T0)
    assert record.then is not None and record.then.data["deadline"] == iso(
        T0 + timedelta(minutes=2)
    )
    for plain in (attempt_of(202, pass_api_key=False), attempt_of(200, pass_api_key=True)):
        record = dispatcher_runs.started(finished(cause, plain, ok, T0), T0)
        assert record.then is None and record.release == (3, 7) and record.health is not None
    failed = finished(cause, attempt_of(202, pass_api_key=True), Outcome(False, "x"), T0)
    assert dispatcher_runs.started(failed, T0).then is None
