"""The cron module: syntax, day matching, and the DST rules of CONTRACT §2."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronhooks_common.cron import CronError, CronSchedule


def runs(expr: str, zone: str, start: str, count: int) -> list[str]:
    """The next `count` slots after `start` (ISO, with offset), as local ISO strings."""
    schedule = CronSchedule.parse(expr, zone)
    return [
        t.astimezone(schedule.zone).isoformat(timespec="minutes")
        for t in schedule.upcoming(datetime.fromisoformat(start), count)
    ]


# (expression, zone, start, expected local slots)
CASES = [
    # --- Europe/Berlin: spring forward 2026-03-29 02:00 CET → 03:00 CEST ---------------
    (
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00+00:00",
        ["2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00"],
    ),
    (
        "0 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00+00:00",
        ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00"],
    ),
    (
        "0,30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00+00:00",  # two skipped times, one slot
        ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00", "2026-03-30T02:30+02:00"],
    ),
    (
        "*/15 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00+00:00",  # wildcard: no run that day
        ["2026-03-30T02:00+02:00", "2026-03-30T02:15+02:00"],
    ),
    (
        "30 * * * *",
        "Europe/Berlin",
        "2026-03-29T00:00+01:00",
        ["2026-03-29T00:30+01:00", "2026-03-29T01:30+01:00", "2026-03-29T03:30+02:00"],
    ),
    (
        "0 3 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00+00:00",  # 3:00 exists: normal
        ["2026-03-29T03:00+02:00", "2026-03-30T03:00+02:00"],
    ),
    # --- Europe/Berlin: fall back 2026-10-25 03:00 CEST → 02:00 CET ---------------------
    (
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00+00:00",  # first occurrence only
        ["2026-10-25T02:30+02:00", "2026-10-26T02:30+01:00"],
    ),
    (
        "*/15 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00+00:00",  # both copies
        [
            "2026-10-25T02:00+02:00",
            "2026-10-25T02:15+02:00",
            "2026-10-25T02:30+02:00",
            "2026-10-25T02:45+02:00",
            "2026-10-25T02:00+01:00",
            "2026-10-25T02:15+01:00",
            "2026-10-25T02:30+01:00",
            "2026-10-25T02:45+01:00",
            "2026-10-26T02:00+01:00",
        ],
    ),
    (
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-25T00:30+02:00",
        [
            "2026-10-25T01:00+02:00",
            "2026-10-25T02:00+02:00",
            "2026-10-25T02:00+01:00",
            "2026-10-25T03:00+01:00",
        ],
    ),
    (
        "59 2 * * *",
        "Europe/Berlin",
        "2026-10-25T02:59+01:00",  # second copy: not again
        ["2026-10-26T02:59+01:00"],
    ),
    # --- America/New_York: 2026-03-08 02:00 → 03:00; 2026-11-01 02:00 → 01:00 ----------
    (
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00-05:00",
        ["2026-03-08T03:00-04:00", "2026-03-09T02:30-04:00"],
    ),
    (
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00-04:00",
        ["2026-11-01T01:30-04:00", "2026-11-02T01:30-05:00"],
    ),
    (
        "*/30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00-04:00",
        [
            "2026-11-01T01:00-04:00",
            "2026-11-01T01:30-04:00",
            "2026-11-01T01:00-05:00",
            "2026-11-01T01:30-05:00",
            "2026-11-02T01:00-05:00",
        ],
    ),
    (
        "@hourly",
        "America/New_York",
        "2026-11-01T00:30-04:00",
        ["2026-11-01T01:00-04:00", "2026-11-01T01:00-05:00", "2026-11-01T02:00-05:00"],
    ),
    (
        "@daily",
        "America/New_York",
        "2026-03-07T12:00-05:00",
        ["2026-03-08T00:00-05:00", "2026-03-09T00:00-04:00"],
    ),
    # --- Australia/Lord_Howe: 30-minute shifts; 2026-04-05 02:00 → 01:30,
    #     2026-10-04 02:00 → 02:30 ----------------------------------------------------
    (
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T12:00+10:30",
        ["2026-10-04T02:30+11:00", "2026-10-05T02:15+11:00"],
    ),
    (
        "45 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T12:00+10:30",  # 2:45 exists
        ["2026-10-04T02:45+11:00", "2026-10-05T02:45+11:00"],
    ),
    (
        "*/15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T12:00+10:30",
        ["2026-10-04T02:30+11:00", "2026-10-04T02:45+11:00", "2026-10-05T02:00+11:00"],
    ),
    (
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T12:00+11:00",
        ["2026-04-05T01:45+11:00", "2026-04-06T01:45+10:30"],
    ),
    (
        "*/15 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T12:00+11:00",
        [
            "2026-04-05T01:00+11:00",
            "2026-04-05T01:15+11:00",
            "2026-04-05T01:30+11:00",
            "2026-04-05T01:45+11:00",
            "2026-04-05T01:30+10:30",
            "2026-04-05T01:45+10:30",
            "2026-04-06T01:00+10:30",
        ],
    ),
    # --- calendar ---------------------------------------------------------------------
    (
        "0 0 29 2 *",
        "UTC",
        "2026-01-01T00:00+00:00",
        ["2028-02-29T00:00+00:00", "2032-02-29T00:00+00:00"],
    ),
    ("0 0 29 2 *", "UTC", "2096-03-01T00:00+00:00", ["2104-02-29T00:00+00:00"]),  # 2100 is not leap
    (
        "0 0 31 * *",
        "UTC",
        "2026-01-01T00:00+00:00",
        ["2026-01-31T00:00+00:00", "2026-03-31T00:00+00:00", "2026-05-31T00:00+00:00"],
    ),
    (
        "0 0 * * 7",
        "UTC",
        "2026-01-01T00:00+00:00",
        ["2026-01-04T00:00+00:00", "2026-01-11T00:00+00:00"],
    ),
    (
        "0 0 * * 0",
        "UTC",
        "2026-01-01T00:00+00:00",
        ["2026-01-04T00:00+00:00", "2026-01-11T00:00+00:00"],
    ),
    (
        "0 12 * jan,JUL sun",
        "UTC",
        "2026-06-30T00:00+00:00",
        ["2026-07-05T12:00+00:00", "2026-07-12T12:00+00:00"],
    ),
    (
        "0 9 * * mon-fri",
        "UTC",
        "2026-01-02T10:00+00:00",  # Friday → Monday
        ["2026-01-05T09:00+00:00", "2026-01-06T09:00+00:00"],
    ),
    # dom and dow both restricted: either matches (the 13th, or any Friday)
    (
        "0 0 13 * fri",
        "UTC",
        "2026-02-10T00:00+00:00",
        [
            "2026-02-13T00:00+00:00",
            "2026-02-20T00:00+00:00",
            "2026-02-27T00:00+00:00",
            "2026-03-06T00:00+00:00",
            "2026-03-13T00:00+00:00",
        ],
    ),
    # a day field starting with * means both must match: odd days that are Mondays
    (
        "0 0 */2 * mon",
        "UTC",
        "2026-01-01T00:00+00:00",
        ["2026-01-05T00:00+00:00", "2026-01-19T00:00+00:00", "2026-02-09T00:00+00:00"],
    ),
    (
        "0 0 1 * *",
        "UTC",
        "2026-12-15T00:00+00:00",
        ["2027-01-01T00:00+00:00", "2027-02-01T00:00+00:00"],
    ),
    (
        "5-59/20 8-10/2 * * *",
        "UTC",
        "2026-01-01T00:00+00:00",
        [
            "2026-01-01T08:05+00:00",
            "2026-01-01T08:25+00:00",
            "2026-01-01T08:45+00:00",
            "2026-01-01T10:05+00:00",
        ],
    ),
    ("@yearly", "Asia/Kolkata", "2026-06-01T00:00+05:30", ["2027-01-01T00:00+05:30"]),
    ("@monthly", "UTC", "2026-01-31T00:00+00:00", ["2026-02-01T00:00+00:00"]),
    ("@weekly", "UTC", "2026-01-01T00:00+00:00", ["2026-01-04T00:00+00:00"]),
    ("@midnight", "UTC", "2026-01-01T00:00+00:00", ["2026-01-02T00:00+00:00"]),
    (
        "* * * * *",
        "UTC",
        "2026-01-01T00:00:30+00:00",
        ["2026-01-01T00:01+00:00", "2026-01-01T00:02+00:00"],
    ),
]


@pytest.mark.parametrize(("expr", "zone", "start", "expected"), CASES)
def test_next_runs(expr: str, zone: str, start: str, expected: list[str]) -> None:
    assert runs(expr, zone, start, len(expected)) == expected


def test_next_after_is_strict() -> None:
    schedule = CronSchedule.parse("0 9 * * *", "UTC")
    at = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    assert schedule.next_after(at) == datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    assert schedule.next_after(at - timedelta(microseconds=1)) == at


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("60 * * * *", "minute field: 60 is outside 0-59"),
        ("* 24 * * *", "hour field: 24 is outside 0-23"),
        ("* * 0 * *", "day-of-month field: 0 is outside 1-31"),
        ("* * * 13 *", "month field: 13 is outside 1-12"),
        ("* * * * 8", "day-of-week field: 8 is outside 0-7"),
        ("* * * * funday", "day-of-week field: 'funday' is not a number"),
        ("5/15 * * * *", "a step needs * or a range"),
        ("*/0 * * * *", "step '0' must be 1 or more"),
        ("10-5 * * * *", "runs backwards"),
        ("1,,2 * * * *", "empty list element"),
        ("* * * *", "expected 5 fields"),
        ("* * * * * *", "expected 5 fields"),
        ("@reboot", "unknown macro"),
        ("", "expected 5 fields"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
    ],
)
def test_invalid_expressions_name_the_reason(expr: str, reason: str) -> None:
    with pytest.raises(CronError) as err:
        CronSchedule.parse(expr, "UTC")
    assert err.value.field == "cronSchedule"
    assert reason in err.value.reason


def test_unknown_zone_names_the_timezone_field() -> None:
    with pytest.raises(CronError) as err:
        CronSchedule.parse("* * * * *", "Mars/Base")
    assert err.value.field == "timezone"


def test_whitespace_and_case_are_normalised() -> None:
    schedule = CronSchedule.parse("  0   9 *  * MON ", "UTC")
    assert schedule.expression == "0 9 * * MON"
    assert CronSchedule.parse("@DAILY", "UTC").expression == "0 0 * * *"


def test_feb_29_alone_is_valid_and_dow_rescues_impossible_dates() -> None:
    CronSchedule.parse("0 0 29 2 *", "UTC")
    # dom 30 in February never matches, but with a weekday either may match
    assert runs("0 0 30 2 mon", "UTC", "2026-02-01T00:00+00:00", 1) == ["2026-02-02T00:00+00:00"]
