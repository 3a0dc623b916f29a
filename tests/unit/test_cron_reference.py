"""Property tests: our cron module against independent cron(8)-faithful implementations.

The fast reference is cronsim (Healthchecks' cron evaluator, which follows Debian's cron(8)
including its DST behaviour), run over random cron(8)-valid expressions in several zones,
around real DST transitions and over long calendar spans. Where cronsim and we disagree,
a minute-by-minute simulation of Debian's cron daemon (tests/support/cron_oracle.py)
decides; the disagreements it settled against cronsim are known cronsim bugs (for
example a 30-minute fall-back in Australia/Lord_Howe makes it skip the next midnight's
first half hour).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from cronhooks_common.cron import CronSchedule
from tests.support.cron_oracle import Oracle

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Europe/London",
    "America/Santiago",
    "Pacific/Chatham",
    "America/Havana",
    "Asia/Kolkata",
    "Asia/Tokyo",
]
# Moments just before 2026 transitions of those zones, and some ordinary ones.
ANCHORS = [
    datetime(2026, 3, 29, 0, 0, tzinfo=UTC),  # EU spring forward
    datetime(2026, 10, 25, 0, 0, tzinfo=UTC),  # EU fall back
    datetime(2026, 3, 8, 5, 0, tzinfo=UTC),  # US spring forward (and Havana)
    datetime(2026, 11, 1, 4, 0, tzinfo=UTC),  # US fall back
    datetime(2026, 4, 4, 14, 0, tzinfo=UTC),  # Lord Howe fall back (30 min)
    datetime(2026, 10, 3, 15, 0, tzinfo=UTC),  # Lord Howe spring forward (30 min)
    datetime(2026, 4, 4, 13, 0, tzinfo=UTC),  # Chatham fall back
    datetime(2026, 9, 26, 13, 0, tzinfo=UTC),  # Chatham spring forward
    datetime(2026, 4, 5, 2, 0, tzinfo=UTC),  # Santiago fall back
    datetime(2026, 9, 6, 3, 0, tzinfo=UTC),  # Santiago spring forward
    datetime(2026, 6, 15, 12, 0, tzinfo=UTC),
    datetime(2027, 1, 15, 12, 0, tzinfo=UTC),
]


def _field(low: int, high: int, star_weight: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    ranges = st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}")
    step = st.integers(1, max(1, (high - low + 1) // 2))
    # cronsim reads a one-value range with a step ("5-5/2") as "5-max/2"; cron(8) as {5}.
    wide = st.tuples(number, number).filter(lambda p: p[0] != p[1])
    wide_ranges = wide.map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.one_of(st.just("*"), wide_ranges), step).map(lambda p: f"{p[0]}/{p[1]}")
    item = st.one_of(number.map(str), ranges, stepped)
    listed = st.lists(item, min_size=1, max_size=3).map(",".join)
    return st.one_of(*([st.just("*")] * star_weight), listed)


@st.composite
def expressions(draw: st.DrawFn, dense_days: bool) -> str:
    minute = draw(_field(0, 59, star_weight=1))
    hour = draw(st.one_of(_field(0, 23, star_weight=1), st.sampled_from(["0", "1", "2", "1-3"])))
    weight = 4 if dense_days else 1
    dom = draw(_field(1, 31, star_weight=weight))
    month = draw(_field(1, 12, star_weight=weight * 2))
    dow = draw(st.one_of(_field(0, 7, star_weight=weight), st.sampled_from(["mon-fri", "sun,sat"])))
    return f"{minute} {hour} {dom} {month} {dow}"


def _compare(expr: str, zone: str, start: datetime, count: int) -> None:
    try:
        ours = CronSchedule.parse(expr, zone).upcoming(start, count)
    except ValueError:
        return  # refused as never firing (e.g. Feb 30); covered by the table tests
    reference = CronSim(expr, start.astimezone(ZoneInfo(zone)))
    expected = [t.astimezone(UTC) for t in islice(reference, count)]
    if ours != expected:
        # Disagreement: the daemon simulation arbitrates over the span both cover.
        end = min(ours[-1], expected[-1]) if ours and expected else (ours or expected)[-1]
        oracle = Oracle(expr, zone).fires(start, end)
        assert [t for t in ours if t <= end] == oracle, expr


@settings(max_examples=int(os.environ.get("CRON_EXAMPLES", "400")), deadline=None)
@given(
    expr=expressions(dense_days=True),
    zone=st.sampled_from(ZONES),
    anchor=st.sampled_from(ANCHORS),
    shift=st.integers(-24 * 60, 24 * 60),
)
def test_matches_cron8_around_dst_transitions(
    expr: str, zone: str, anchor: datetime, shift: int
) -> None:
    _compare(expr, zone, anchor + timedelta(minutes=shift), 60)


@settings(max_examples=int(os.environ.get("CRON_EXAMPLES", "400")), deadline=None)
@given(
    expr=expressions(dense_days=False),
    zone=st.sampled_from(ZONES),
    start=st.datetimes(datetime(2024, 1, 1), datetime(2099, 1, 1), timezones=st.just(UTC)),
)
def test_matches_cron8_on_calendar_rules(expr: str, zone: str, start: datetime) -> None:
    _compare(expr, zone, start, 25)
