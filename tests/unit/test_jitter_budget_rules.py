"""The pure rules of jitterSeconds and maxDeliveriesPerDay (CONTRACT §13): the offset, the
local day a slot counts on, and the validation of both fields."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest

from cronhooks_admin.commands.validation import normalize
from cronhooks_admin.errors import InputError
from cronhooks_common.budget import daily_limit, local_day
from cronhooks_common.jitter import jitter_offset, offset_of


@pytest.mark.parametrize("window", [1, 7, 60, 3600])
def test_the_offset_is_within_the_window_and_the_same_every_time(window: int) -> None:
    for webhook_id in range(1, 2000):
        offset = jitter_offset(webhook_id, window)
        assert timedelta(0) <= offset < timedelta(seconds=window)
        assert offset == jitter_offset(webhook_id, window)  # no state, no salt


def test_the_offset_is_a_known_answer() -> None:
    # SHA-256 of a fixed text, not hash(): PYTHONHASHSEED and the process do not enter, so a
    # replica started tomorrow computes the same offset.
    digest = hashlib.sha256(b"cronhooks-jitter:42").digest()
    expected = int.from_bytes(digest[:8], "big") % 60_000
    assert jitter_offset(42, 60) == timedelta(milliseconds=expected)


def test_no_jitter_is_no_offset_and_old_configs_have_none() -> None:
    assert jitter_offset(5, 0) == timedelta(0)
    assert offset_of(5, {}) == timedelta(0)  # a configuration written before the field
    assert offset_of(5, {"jitter_seconds": 30}) == jitter_offset(5, 30)


def test_a_herd_of_consecutive_ids_spreads_flat_over_the_window() -> None:
    per_second = Counter(int(jitter_offset(i, 60).total_seconds()) for i in range(1, 10_001))
    assert sorted(per_second) == list(range(60))
    mean = 10_000 / 60
    # Uniform hashing: each second within ±30 % of the mean (Poisson noise is ~±8 %).
    assert min(per_second.values()) > 0.7 * mean and max(per_second.values()) < 1.3 * mean


def test_a_slot_counts_on_its_day_in_the_webhooks_zone() -> None:
    # 23:30 UTC is already the next day in Berlin, still the same day in New York.
    moment = datetime(2026, 6, 1, 23, 30, tzinfo=UTC)
    assert local_day(moment, "UTC") == date(2026, 6, 1)
    assert local_day(moment, "Europe/Berlin") == date(2026, 6, 2)
    assert local_day(moment, "America/New_York") == date(2026, 6, 1)


@pytest.mark.parametrize(
    ("first", "last", "day", "hours"),
    [
        # Berlin's spring-forward day has 23 hours, its fall-back day 25.
        (
            datetime(2026, 3, 28, 23, 0, tzinfo=UTC),
            datetime(2026, 3, 29, 21, 59, tzinfo=UTC),
            date(2026, 3, 29),
            23,
        ),
        (
            datetime(2026, 10, 24, 22, 0, tzinfo=UTC),
            datetime(2026, 10, 25, 22, 59, tzinfo=UTC),
            date(2026, 10, 25),
            25,
        ),
    ],
)
def test_dst_days_of_23_and_25_hours_are_one_day_each(
    first: datetime, last: datetime, day: date, hours: int
) -> None:
    assert local_day(first, "Europe/Berlin") == day
    assert local_day(last, "Europe/Berlin") == day
    assert local_day(first - timedelta(minutes=1), "Europe/Berlin") == day - timedelta(days=1)
    assert local_day(last + timedelta(minutes=1), "Europe/Berlin") == day + timedelta(days=1)
    assert round((last - first).total_seconds() / 3600) == hours


def test_the_limit_of_a_config() -> None:
    assert daily_limit({}) is None
    assert daily_limit({"max_deliveries_per_day": None}) is None
    assert daily_limit({"max_deliveries_per_day": 3}) == 3


@pytest.mark.parametrize("value", [0, 1, 60, 3600])
def test_jitter_seconds_that_pass(value: int) -> None:
    assert normalize({"jitter_seconds": value}) == {"jitter_seconds": value}


@pytest.mark.parametrize("value", [-1, 3601, 86400])
def test_bad_jitter_seconds_are_named(value: int) -> None:
    with pytest.raises(InputError) as err:
        normalize({"jitter_seconds": value})
    assert err.value.field == "jitterSeconds" and "from 0 to 3600" in err.value.reason


def test_a_limit_may_be_set_or_cleared_with_null() -> None:
    assert normalize({"max_deliveries_per_day": 5}) == {"max_deliveries_per_day": 5}
    assert normalize({"max_deliveries_per_day": None}) == {"max_deliveries_per_day": None}
    assert normalize({}) == {}  # not given: unchanged on update


@pytest.mark.parametrize("value", [0, -3, 1_000_001])
def test_bad_limits_are_named(value: int) -> None:
    with pytest.raises(InputError) as err:
        normalize({"max_deliveries_per_day": value})
    assert err.value.field == "maxDeliveriesPerDay" and "from 1 to" in err.value.reason
