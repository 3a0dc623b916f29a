"""CONTRACT §16.1: an answer's costs and logs, sanitised (agent_report.py) and judged with
their attempt (outcome.py): what is kept, what is dropped and how it is named, and that a
bad report never fails an attempt."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronhooks_common import agent_report
from cronhooks_common.agent_report import NOTHING, of_answer
from cronhooks_common.events import AgentLog, CostAmount
from cronhooks_dispatcher.outcome import classify
from cronhooks_dispatcher.sender import HttpResult

DROP_NOTE = "{n} further log entries dropped: over the 500-entry / 65536-byte limit"


def warnings(report: agent_report.AgentReport) -> list[str]:
    return [e.msg for e in report.logs if e.level == "warn" and e.ts is None and e.data is None]


def test_an_answer_without_costs_and_logs_reports_nothing() -> None:
    assert of_answer({"status": "ok", "changes": []}) is NOTHING
    assert of_answer({"costs": None, "logs": None}) is NOTHING
    assert agent_report.event_fields(NOTHING) == {}


def test_costs_are_kept_in_the_answers_order_as_floats() -> None:
    report = of_answer({"costs": {"usd": 0.004, "tokens": 5186, "a.b:c-d_1": 0}})
    assert report.costs == (
        CostAmount(unit="usd", amount=0.004),
        CostAmount(unit="tokens", amount=5186.0),
        CostAmount(unit="a.b:c-d_1", amount=0.0),
    )
    assert report.logs == ()


@pytest.mark.parametrize(
    ("unit", "amount", "reason"),
    [
        ("", 1, "unit names are 1-64 characters"),
        ("x" * 65, 1, "unit names are 1-64 characters"),
        ("with space", 1, "unit names are 1-64 characters"),
        ("€", 1, "unit names are 1-64 characters"),
        ("usd", -0.5, "finite number >= 0"),
        ("usd", float("nan"), "finite number >= 0"),
        ("usd", float("inf"), "finite number >= 0"),
        ("usd", 10**400, "finite number >= 0"),
        ("usd", True, "must be a number, not a boolean"),
        ("usd", "1.5", "must be a number, not a string"),
        ("usd", None, "must be a number, not null"),
        ("usd", [1], "must be a number, not an array"),
    ],
)
def test_a_bad_cost_is_dropped_and_named(unit: str, amount: object, reason: str) -> None:
    report = of_answer({"costs": {unit: amount, "tokens": 3}})
    assert report.costs == (CostAmount(unit="tokens", amount=3.0),)
    [note] = warnings(report)
    shown = unit if len(unit) <= 64 else unit[:64] + "…"
    assert note.startswith(f"costs[{json.dumps(shown, ensure_ascii=False)}] dropped: ")
    assert reason in note


def test_beyond_32_units_the_first_32_valid_are_kept_and_the_rest_named() -> None:
    costs: dict[str, Any] = {"bad unit": 1}
    costs.update({f"u{i}": i for i in range(40)})
    report = of_answer({"costs": costs})
    assert [c.unit for c in report.costs] == [f"u{i}" for i in range(32)]
    notes = warnings(report)
    assert notes[0].startswith('costs["bad unit"] dropped')
    assert notes[1:] == [f'costs["u{i}"] dropped: over the 32-unit limit' for i in range(32, 40)]


@pytest.mark.parametrize("costs", [[1, 2], "5 usd", 3, True, {}])
def test_a_bad_costs_value_never_fails_the_attempt(costs: object) -> None:
    body = json.dumps({"status": "ok", "costs": costs}).encode()
    outcome = classify(HttpResult(200, body, None, 5))
    assert outcome.succeeded and outcome.error is None
    assert outcome.report.costs == ()
    if costs != {}:
        assert warnings(outcome.report)[0].startswith("costs dropped: must be an object")


def test_logs_are_kept_in_order_ts_normalised_data_as_given() -> None:
    logs = [
        {"ts": "2026-02-09T10:00:00.5+01:00", "level": "info", "msg": "start", "data": {"k": [1]}},
        {"level": "debug", "msg": "no ts, no data"},
        {"ts": "2026-02-09t09:00:01z", "level": "x", "msg": "", "data": None, "extra": 1},
    ]
    report = of_answer({"logs": logs})
    assert report.logs == (
        AgentLog(ts="2026-02-09T09:00:00.500000+00:00", level="info", msg="start", data={"k": [1]}),
        AgentLog(ts=None, level="debug", msg="no ts, no data"),
        AgentLog(ts="2026-02-09T09:00:01+00:00", level="x", msg=""),
    )
    assert report.costs == ()


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("just text", "an entry must be an object, not a string"),
        (["info", "msg"], "an entry must be an object, not an array"),
        ({"msg": "no level"}, "level must be a string"),
        ({"level": 3, "msg": "m"}, "level must be a string"),
        ({"level": "info"}, "msg must be a string"),
        ({"level": "info", "msg": {"a": 1}}, "msg must be a string"),
        ({"level": "info", "msg": "m", "ts": "yesterday"}, "ts must be an RFC 3339 date-time"),
        ({"level": "info", "msg": "m", "ts": "2026-02-09"}, "ts must be an RFC 3339 date-time"),
        ({"level": "info", "msg": "m", "ts": "2026-02-09T09:00:00"}, "RFC 3339"),
        ({"level": "info", "msg": "m", "ts": "2026-13-09T09:00:00Z"}, "RFC 3339"),
        ({"level": "info", "msg": "m", "ts": 1738000000}, "RFC 3339"),
        ({"level": "info", "msg": "a\x00b"}, "NUL characters or invalid Unicode"),
        ({"level": "info", "msg": "m", "data": {"x": "\ud800"}}, "invalid Unicode"),
        ({"level": "info", "msg": "m", "data": [float("nan")]}, "NaN or an infinity"),
    ],
)
def test_a_malformed_log_entry_is_dropped_and_named(entry: object, reason: str) -> None:
    report = of_answer({"logs": [{"level": "info", "msg": "first"}, entry]})
    assert report.logs[0] == AgentLog(ts=None, level="info", msg="first")
    [note] = warnings(report)
    assert note.startswith("logs[1] dropped: ") and reason in note


def test_past_500_entries_the_first_500_are_kept_then_the_drop_note() -> None:
    logs = [{"level": "info", "msg": str(i)} for i in range(503)]
    report = of_answer({"logs": logs})
    assert [e.msg for e in report.logs[:500]] == [str(i) for i in range(500)]
    assert report.logs[500] == AgentLog(ts=None, level="warn", msg=DROP_NOTE.format(n=3))
    assert len(report.logs) == 501


def test_exactly_500_entries_need_no_note() -> None:
    report = of_answer({"logs": [{"level": "info", "msg": "m"}] * 500})
    assert len(report.logs) == 500
    assert all(e.msg == "m" for e in report.logs)


def _size(entries: list[AgentLog]) -> int:
    as_kept = [{"ts": e.ts, "level": e.level, "msg": e.msg, "data": e.data} for e in entries]
    return len(json.dumps(as_kept, ensure_ascii=False, separators=(",", ":")).encode())


def test_past_65536_bytes_the_first_entries_that_fit_are_kept_then_the_drop_note() -> None:
    # multi-byte text: bytes of UTF-8 are counted, not characters
    logs = [{"level": "info", "msg": "é" * 5000, "data": {"i": i}} for i in range(10)]
    report = of_answer({"logs": logs})
    kept = list(report.logs[:-1])
    assert len(kept) == 6  # each entry is a little over 10,000 bytes
    assert _size(kept) <= 65_536 < _size([*kept, report.logs[0]])
    assert report.logs[-1].msg == DROP_NOTE.format(n=4)


def test_the_byte_limit_counts_the_compact_json_array_exactly() -> None:
    entry = {"ts": None, "level": "info", "msg": "", "data": None}
    one = len(json.dumps(entry, separators=(",", ":")))
    # n entries take 2 + n * one + (n - 1) bytes; pad the last so the array is 65,536 exactly
    n = 10
    pad = 65_536 - (2 + n * one + (n - 1))
    logs = [dict(entry) for _ in range(n)]
    logs[-1]["msg"] = "x" * pad
    assert len(of_answer({"logs": logs}).logs) == n
    logs[-1]["msg"] = "x" * (pad + 1)
    report = of_answer({"logs": logs})
    assert len(report.logs) == n and report.logs[-1].msg == DROP_NOTE.format(n=1)


def test_malformed_entries_and_bad_costs_are_named_after_the_logs_not_counted() -> None:
    logs: list[object] = [7] + [{"level": "info", "msg": "m"}] * 500
    report = of_answer({"logs": logs, "costs": {"usd": -1}})
    assert len(report.logs) == 500 + 2  # 500 kept, and two warnings outside the limits
    assert warnings(report) == [
        "logs[0] dropped: an entry must be an object, not a number",
        'costs["usd"] dropped: amount must be a finite number >= 0',
    ]


def test_named_drops_are_bounded_and_counted_beyond() -> None:
    report = of_answer({"logs": [1] * 150, "costs": {"": 1}})
    notes = warnings(report)
    assert len(notes) == agent_report.MAX_NAMED + 1
    assert notes[-1] == "51 further invalid costs or log entries dropped"


def test_logs_not_an_array_are_named() -> None:
    report = of_answer({"logs": {"level": "info", "msg": "m"}})
    assert warnings(report) == ["logs dropped: must be an array, not an object"]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, {"error": "boom"}),
        (200, {"status": "error", "message": "no data"}),
        (200, {"status": "ok", "changes": "not an array"}),
        (200, {"status": "ok", "message": "nul \x00 here"}),
        (202, {"status": "accepted"}),
        (410, {}),
        (302, {}),
    ],
)
def test_costs_and_logs_are_reported_whatever_the_status(status: int, body: dict[str, Any]) -> None:
    answer = {**body, "costs": {"usd": 0.5}, "logs": [{"level": "info", "msg": "m"}]}
    outcome = classify(HttpResult(status, json.dumps(answer).encode(), None, 5))
    assert outcome.report.costs == (CostAmount(unit="usd", amount=0.5),)
    assert outcome.report.logs == (AgentLog(ts=None, level="info", msg="m"),)


def test_the_keys_may_be_escaped_in_a_body_that_is_not_a_sync_answer() -> None:
    body = b'{"\\u0063osts": {"usd": 1}}'
    assert classify(HttpResult(500, body, None, 5)).report.costs == (
        CostAmount(unit="usd", amount=1.0),
    )


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b"[" * 70 + b"]" * 70])
def test_a_body_that_is_no_json_object_reports_nothing(body: bytes) -> None:
    for status in (200, 202, 500):
        assert classify(HttpResult(status, body, None, 5)).report is NOTHING


def test_a_report_survives_the_wait_for_the_importer() -> None:
    report = of_answer(
        {
            "costs": {"tokens": 12, "bad unit": 1},
            "logs": [{"ts": "2026-02-09T09:00:00Z", "level": "info", "msg": "m", "data": [1]}],
        }
    )
    kept = json.loads(json.dumps(agent_report.to_data(report)))  # through a jsonb column
    assert agent_report.from_data(kept) == report
    assert agent_report.to_data(NOTHING) is None
    assert agent_report.from_data(None) is NOTHING
