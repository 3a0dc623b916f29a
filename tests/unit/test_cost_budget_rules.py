"""maxCostPerDay and costTotals' pure rules (CONTRACT §16.1, §16.4): the limits' input
checks, the day a report counts on in the webhook's zone, when a limit is reached."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from cronhooks_admin.commands.cost_limits import check_cost_limits
from cronhooks_admin.errors import InputError
from cronhooks_common.daily_costs import reported
from cronhooks_common.events import CostAmount
from cronhooks_scheduler.cost_budget import reached


def test_good_limits_are_kept_in_their_order() -> None:
    given = [{"unit": "usd", "amount": 1.5}, {"unit": "tokens:in", "amount": 5000}]
    assert check_cost_limits(given) == [
        {"unit": "usd", "amount": 1.5},
        {"unit": "tokens:in", "amount": 5000.0},
    ]
    assert check_cost_limits([]) == []
    assert check_cost_limits([{"unit": "a" * 64, "amount": 1e-9}])[0]["unit"] == "a" * 64


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ([{"unit": "usd", "amount": 0}], "amount must be more than 0"),
        ([{"unit": "usd", "amount": -1}], "amount must be more than 0"),
        ([{"unit": "usd", "amount": float("inf")}], "amount must be more than 0"),
        ([{"unit": "", "amount": 1}], "unit names are 1-64 characters"),
        ([{"unit": "a" * 65, "amount": 1}], "unit names are 1-64 characters"),
        ([{"unit": "us d", "amount": 1}], "unit names are 1-64 characters"),
        ([{"unit": "usd€", "amount": 1}], "unit names are 1-64 characters"),
        ([{"unit": "usd", "amount": 1}, {"unit": "usd", "amount": 2}], "appears twice"),
        ([{"unit": f"u{i}", "amount": 1} for i in range(33)], "at most 32 units"),
    ],
)
def test_bad_limits_name_the_field(limits: list[dict[str, object]], reason: str) -> None:
    with pytest.raises(InputError) as caught:
        check_cost_limits(limits)
    assert caught.value.field == "maxCostPerDay"
    assert reason in str(caught.value)


def test_costs_count_on_the_day_they_are_reported_in_the_zone_also_on_a_dst_day() -> None:
    costs = [CostAmount(unit="usd", amount=0.4), CostAmount(unit="tokens", amount=0)]
    # Berlin's 2026-03-29 has 23 hours: it starts at 03-28 23:00 UTC and ends at 03-29
    # 22:00 UTC (already 03-30 in Berlin, still 03-29 in UTC).
    berlin = "Europe/Berlin"
    at = {
        datetime(2026, 3, 28, 22, 59, 59, tzinfo=UTC): date(2026, 3, 28),
        datetime(2026, 3, 28, 23, 0, tzinfo=UTC): date(2026, 3, 29),
        datetime(2026, 3, 29, 21, 59, 59, tzinfo=UTC): date(2026, 3, 29),
        datetime(2026, 3, 29, 22, 0, tzinfo=UTC): date(2026, 3, 30),
    }
    for instant, day in at.items():
        # a zero adds nothing: every kept sum is more than zero
        assert reported(7, costs, instant, berlin) == {(7, day, "usd"): 0.4}, instant
    assert reported(7, costs, datetime(2026, 3, 29, 22, 0, tzinfo=UTC), "UTC") == {
        (7, date(2026, 3, 29), "usd"): 0.4
    }
    # one unit twice in a report (never from the dispatcher, which keeps an object's keys)
    twice = [CostAmount(unit="usd", amount=0.25)] * 2
    assert reported(1, twice, datetime(2026, 1, 1, tzinfo=UTC), "UTC") == {
        (1, date(2026, 1, 1), "usd"): 0.5
    }


def test_a_limit_is_reached_at_its_amount_despite_float_sums() -> None:
    usd = CostAmount(unit="usd", amount=0.8)
    tokens = CostAmount(unit="tokens", amount=1000)
    assert reached((usd, tokens), {}) is None
    assert reached((usd, tokens), {"usd": 0.5, "tokens": 999}) is None
    assert reached((usd, tokens), {"usd": 0.7 + 0.1}) == usd  # 0.7999999999999999
    assert reached((usd, tokens), {"usd": 0.1, "tokens": 1000}) == tokens
    assert reached((usd, tokens), {"usd": 5, "tokens": 5000}) == usd  # the first in order
    assert reached((usd,), {"tokens": 10**9}) is None  # a unit without a limit
    assert reached((), {"usd": 10}) is None
