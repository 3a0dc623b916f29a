"""Hostile reports and heartbeats of runs (CONTRACT §16.2, §15): a million log entries,
huge `data`, JSON nested to and past the bound, NaN, NUL and lone surrogates, costs of
any shape — each answered 200 with the run's logs cut to the limits, or 400/413 naming
what is wrong; never a 500, never more stored than the limits allow. Real services
in-process on the real database and broker, a real agent on loopback answering 202."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.agent import Agent
from tests.support.flows import create_webhook, events_of
from tests.support.runs import AsyncAgent, heartbeat, report, run_of, run_row
from tests.support.system import System

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ENTRY = b'{"level":"info","msg":"m","data":{"k":[1,2,3]}}'


def nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
json_any = st.recursive(
    json_scalar,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
raw_entry = st.one_of(
    st.just(ENTRY),
    st.builds(
        lambda v: b'{"level":"info","msg":"d","data":' + v + b"}",
        st.sampled_from(
            [
                nested(60),
                nested(63),
                b'"' + b"x" * 300_000 + b'"',
                b"NaN",
                b"1e999",
                b'"\\ud800"',
                b'"\\u0000"',
            ]
        ),
    ),
    st.builds(lambda v: json.dumps(v).encode(), json_any),
    st.sampled_from([b'{"level":1,"msg":"x"}', b'{"level":"info","msg":"x","ts":"nope"}', b"7"]),
)
raw_logs = st.one_of(
    st.lists(raw_entry, max_size=30).map(lambda xs: b"[" + b",".join(xs) + b"]"),
    st.integers(1, 200_000).map(lambda n: b"[" + b",".join([b"{}"] * n) + b"]"),
    st.integers(1_000, 40_000).map(lambda n: b"[" + b",".join([ENTRY] * n) + b"]"),
    st.sampled_from([b"null", b'"text"', b"{}", nested(62), nested(70)]),
)
raw_costs = st.one_of(
    st.builds(lambda v: json.dumps(v).encode(), json_any),
    st.sampled_from(
        [
            b'{"usd": NaN, "tokens": 1e999, "x": -1, "": 1}',
            b"{" + b",".join(b'"u%d": 1' % i for i in range(1_000)) + b"}",
            b'{"' + b"u" * 10_000 + b'": 1}',
        ]
    ),
)
status = st.sampled_from([b'"ok"', b'"error"', b'"OK"', b"null", b"1"])


def report_body(s: bytes, logs: bytes, costs: bytes, message: bytes) -> bytes:
    return (
        b'{"status":'
        + s
        + b',"message":'
        + message
        + b',"costs":'
        + costs
        + b',"logs":'
        + logs
        + b"}"
    )


messages = st.sampled_from(
    [b'"done"', b"null", b'"' + b"m" * 100_000 + b'"', b'"\\u0000\\ud800"', b"3"]
)


# The webhook whose runs the examples start, per test system (hypothesis runs every
# example with the same function-scoped fixtures).
HOOKS: dict[int, int] = {}


@pytest.fixture
def runner(agent: Agent) -> AsyncAgent:
    return AsyncAgent(agent)


@FUZZ
@given(beat=raw_logs, s=status, logs=raw_logs, costs=raw_costs, message=messages)
async def test_hostile_reports_and_heartbeats_are_cut_never_a_500(
    system: System,
    runner: AsyncAgent,
    beat: bytes,
    s: bytes,
    logs: bytes,
    costs: bytes,
    message: bytes,
) -> None:
    if id(system) not in HOOKS:
        HOOKS[id(system)], _ = await create_webhook(
            system, system.admin, runner.url, passApiKey=True, writePatterns=["*"]
        )
    delivery_id, token = await run_of(system, runner, HOOKS[id(system)])
    code, got = await heartbeat(system, token, raw=b'{"logs":' + beat + b"}")
    assert code in (200, 400, 413), (code, got)
    code, got = await report(system, token, raw=report_body(s, logs, costs, message))
    assert code in (200, 400, 413), (code, got)
    row = await run_row(system.dsn, delivery_id)
    assert row is not None
    assert row["log_count"] <= 500 and row["log_bytes"] <= 65_536
    assert len(row["logs"]) <= 500 + 101 + 1 and len(row["costs"]) <= 32
    if code == 200:
        assert row["state"] in ("SUCCEEDED", "FAILED")
        events = await events_of(system.dsn, f"delivery-{delivery_id}")
        assert [e["type"] for e in events].count("run.finished") == 1
    else:
        assert row["state"] == "RUNNING"
