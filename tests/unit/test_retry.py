from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronhooks_dispatcher.retry import backoff, next_attempt_at, retry_after

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)


def test_backoff_triples_from_ten_seconds_and_caps_at_an_hour() -> None:
    assert [backoff(n).total_seconds() for n in range(1, 8)] == [10, 30, 90, 270, 810, 2430, 3600]
    assert backoff(50) == timedelta(hours=1)


def test_retry_after_seconds_and_http_date() -> None:
    assert retry_after("120", NOW) == timedelta(seconds=120)
    assert retry_after("Mon, 09 Feb 2026 09:05:00 GMT", NOW) == timedelta(minutes=5)
    assert retry_after("Mon, 09 Feb 2026 08:00:00 GMT", NOW) == timedelta(0)  # in the past
    assert retry_after("soon", NOW) is None
    assert retry_after(None, NOW) is None
    assert retry_after("999999999", NOW) == timedelta(days=1)  # bounded


def test_retry_after_wins_over_backoff() -> None:
    assert next_attempt_at(1, "5", NOW) == NOW + timedelta(seconds=5)
    assert next_attempt_at(2, None, NOW) == NOW + timedelta(seconds=30)
