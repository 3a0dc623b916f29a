"""The debug sink's parameters and its bounded call log (cronhooks_admin.http.sink), pure."""

from __future__ import annotations

import json

import pytest

from cronhooks_admin.errors import InputError
from cronhooks_admin.http.sink import (
    MAX_DELAY_SECONDS,
    Call,
    CallLog,
    body_value,
    parse_delay,
    parse_id,
    parse_last,
    parse_status,
    text_map,
)


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


THOUSANDS_OF_DIGITS = ["1" + "0" * 5000, "9" * 4301, "1" * 20]


@pytest.mark.parametrize("text", THOUSANDS_OF_DIGITS)
def test_numbers_of_thousands_of_digits_are_refused_by_name_not_by_int(text: str) -> None:
    for parse, field in ((parse_status, "status"), (parse_last, "last"), (parse_id, "id")):
        with pytest.raises(InputError) as refused:
            parse(text)
        assert refused.value.field == field


def test_leading_zeros_are_still_the_number() -> None:
    assert parse_status("0" * 30 + "201") == 201
    assert parse_last("0" * 5000 + "7") == 7  # int() alone refuses 5,001 digits
    assert parse_id("0" * 30 + "12") == 12


@pytest.mark.parametrize("text", [None, "", "0", "-1", "x", "1e3", "١", str(2**63)])
def test_ids_are_positive_64_bit_integers(text: str | None) -> None:
    with pytest.raises(InputError) as refused:
        parse_id(text)
    assert refused.value.field == "id"
    assert parse_id(str(2**63 - 1)) == 2**63 - 1


def test_bodies_nested_past_64_levels_show_as_their_text() -> None:
    """The listing is written as JSON, whose writer does not recurse a thousand levels."""
    at_the_bound = b"[" * 64 + b"]" * 64
    assert body_value(at_the_bound) == json.loads(at_the_bound)
    for levels in (65, 1_000, 30_000):
        deep = b"[" * levels + b"]" * levels
        assert body_value(deep) == deep.decode()


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
