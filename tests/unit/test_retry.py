from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronhooks_dispatcher.retry import MAX_RETRY_AFTER, backoff, next_attempt_at, retry_after

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_backoff_triples_from_ten_seconds_and_caps_at_an_hour() -> None:
    assert [backoff(n).total_seconds() for n in range(1, 8)] == [10, 30, 90, 270, 810, 2430, 3600]
    assert backoff(50) == timedelta(hours=1)


def test_retry_after_seconds_and_http_date() -> None:
    assert retry_after("120", NOW) == timedelta(seconds=120)
    assert retry_after(" 120 ", NOW) == timedelta(seconds=120)
    assert retry_after("0", NOW) == timedelta(0)
    assert retry_after("Mon, 09 Feb 2026 09:05:00 GMT", NOW) == timedelta(minutes=5)
    assert retry_after(None, NOW) is None
    assert retry_after("", NOW) is None


def test_the_wait_is_capped_at_an_hour() -> None:
    assert MAX_RETRY_AFTER == HOUR
    assert retry_after("3600", NOW) == HOUR
    assert retry_after("3601", NOW) == HOUR
    assert retry_after("999999999", NOW) == HOUR
    assert retry_after("Tue, 10 Feb 2026 09:00:00 GMT", NOW) == HOUR  # a day ahead


@pytest.mark.parametrize(
    "header",
    [
        "999999999999999",  # the review's: overflowed timedelta
        "9" * 5000,  # beyond Python's int() digit limit
        "0" * 5000 + "7",  # many digits, a small number: still ASCII digits
    ],
)
def test_any_number_of_ascii_digits_is_read_without_overflow(header: str) -> None:
    wait = retry_after(header, NOW)
    assert wait is not None and timedelta(0) <= wait <= HOUR
    if header.startswith("0"):
        assert wait == timedelta(seconds=7)


@pytest.mark.parametrize(
    "header",
    [
        "²",  # str.isdigit() says yes, int() says no
        "٣",  # Arabic-Indic digit
        "１２",  # fullwidth digits
        "-5",
        "+5",
        "1.5",
        "1e3",
        "soon",
        "Mon, 09 Feb 2026 08:00:00 GMT",  # in the past
        "Mon, 09 Feb 99999 08:00:00 GMT",
        "Mon, 32 Feb 2026 08:00:00 GMT",
        "Mon, 09 Feb 2026 25:61:61 GMT",
        "\x00",
        "\ud800",
    ],
)
def test_anything_else_is_no_answer_the_usual_backoff(header: str) -> None:
    assert retry_after(header, NOW) is None
    assert next_attempt_at(2, header, NOW) == NOW + backoff(2)


def test_retry_after_wins_over_backoff() -> None:
    assert next_attempt_at(1, "5", NOW) == NOW + timedelta(seconds=5)
    assert next_attempt_at(2, None, NOW) == NOW + timedelta(seconds=30)


def test_a_retry_after_of_zero_asks_for_no_wait_the_usual_backoff() -> None:
    """Not a retry at once: a fire is retried for 15 minutes, and `503` + `0` would loop."""
    assert next_attempt_at(1, "0", NOW) == NOW + timedelta(seconds=10)
    assert next_attempt_at(1, "000", NOW) == NOW + timedelta(seconds=10)
