"""The debug sink's parameters and its bounded call log (cronhooks_admin.sink), pure."""

from __future__ import annotations

import pytest

from cronhooks_admin.sink import (
    MAX_DELAY_SECONDS,
    Call,
    CallLog,
    body_value,
    parse_delay,
    parse_last,
    parse_status,
    text_map,
)
from cronhooks_admin.validation import InputError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (None, 0.0),
        ("0", 0.0),
        ("0s", 0.0),
        ("250ms", 0.25),
        ("2s", 2.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("1m", 60.0),
        ("1m0s", 60.0),
        ("500us", 0.0005),
        ("500µs", 0.0005),
        ("1s500ms", 1.5),
    ],
)
def test_delays_read_as_go_durations(text: str | None, seconds: float) -> None:
    assert parse_delay(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "2", "-1s", "1 s", "s", "1d", "١s", "1m1s", "1h", "2S", "1.5.5s", "nan"]
)
def test_bad_or_too_long_delays_are_refused_by_name(text: str) -> None:
    with pytest.raises(InputError) as refused:
        parse_delay(text)
    assert refused.value.field == "delay"
    assert parse_delay(f"{MAX_DELAY_SECONDS:g}s") == MAX_DELAY_SECONDS


@pytest.mark.parametrize("text", ["", "abc", "99", "199", "600", "2000", "-200", "２００", "20.0"])
def test_statuses_outside_200_to_599_are_refused(text: str) -> None:
    with pytest.raises(InputError) as refused:
        parse_status(text)
    assert refused.value.field == "status"


def test_statuses_and_last() -> None:
    assert [parse_status(None), parse_status("200"), parse_status("599")] == [200, 200, 599]
    assert [parse_last(None), parse_last("1"), parse_last("50")] == [None, 1, 50]
    for bad in ("0", "-1", "x", "", "١"):
        with pytest.raises(InputError):
            parse_last(bad)


def test_bodies_show_as_json_when_they_are_and_as_text_else() -> None:
    assert body_value(b'{"id": 4, "b": [1]}') == {"id": 4, "b": [1]}
    assert body_value(b"not json") == "not json"
    assert body_value(b"") == ""
    assert body_value(b"NaN") == "NaN"  # what JSON does not allow stays text
    assert body_value(b"a\x00\xffb") == "a\ufffd\ufffdb"  # JSON can carry the answer


def test_repeated_names_are_folded_and_text_is_cleaned() -> None:
    pairs = [("X-A", "1"), ("X-A", "2"), ("X-B", "a\x00b")]
    assert text_map(pairs) == {"X-A": "1, 2", "X-B": "a\ufffdb"}


def call(n: int, size: int = 1) -> Call:
    return Call(f"t{n}", "POST", "/debug/test_webhook", {}, {}, b"x" * size)


def test_the_log_keeps_the_latest_calls_within_both_bounds() -> None:
    log = CallLog(max_calls=3, max_bytes=10)
    for n in range(5):
        log.record(call(n))
    assert [c.received_at for c in log.latest()] == ["t2", "t3", "t4"]
    assert [c.received_at for c in log.latest(2)] == ["t3", "t4"]
    assert [c.received_at for c in log.latest(9)] == ["t2", "t3", "t4"]
    log.record(call(5, size=9))  # 1 + 1 + 9 bytes > 10: the oldest go
    assert [c.received_at for c in log.latest()] == ["t4", "t5"]
    log.record(call(6, size=11))  # larger than the bound alone: kept nowhere
    assert log.latest() == []
    assert log.clear() == 0
