"""The benches keep working as the system changes: the quick suites run here at a tiny size
against real processes (a bench that breaks is found by `make test`, not by the next
`make bench`). Only that they run and measure something is checked, never a speed."""

from __future__ import annotations

import re

import pytest

from bench import amqp, dispatch, events_codec, notes

pytestmark = pytest.mark.e2e


def _rows(content: str) -> list[list[str]]:
    lines = [line for line in content.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


async def test_the_note_apply_bench_pushes_as_a_webhook_its_tokens_may_write_for() -> None:
    [(title, content)] = await notes.apply_rate(sizes=((1, 16), (4, 32)))
    assert title.startswith("Note apply rate")
    rows = _rows(content)
    assert [row[:3] for row in rows] == [["1", "16", "8"], ["4", "32", "8"]]
    assert all(float(row[3]) > 0 for row in rows)


async def test_the_trigger_burst_bench_delivers_every_trigger() -> None:
    sections = await dispatch.trigger_burst(n=20)
    content = "\n".join(c for _, c in sections)
    ours = next(row for row in _rows(content) if row[0].startswith("cronhooks"))
    assert ours[1] == "20" and ours[-1] == "0"  # all 20, no duplicates at the agent
    assert re.fullmatch(r"\d+", ours[2])


async def test_the_amqp_ceiling_publishes_and_consumes_every_event() -> None:
    [(title, content)] = await amqp.ceiling(n=200)
    assert title.startswith("AMQP ceiling")
    rows = _rows(content)
    assert [row[1] for row in rows] == ["200", "200", "200"]
    assert all(float(row[2]) > 0 for row in rows)


def test_the_event_codec_bench_measures_every_candidate() -> None:
    rows = events_codec.measure(number=50)
    assert [step for step, _ in rows] == [
        "build the event",
        "data -> JSON (store, publish)",
        "JSON -> typed data (consume)",
        "JSON -> typed data, one pass",
    ]
    assert all(set(v) == {"dict", "msgspec Struct", "dataclass"} for _, v in rows)
    assert all(t > 0 for _, v in rows for t in v.values())
