"""Schedules in words (CONTRACT §17): every cron form cronhooks accepts (cron.py) gets an
English sentence with 24-hour HH:MM times and full weekday names, true to cron(8)'s rules;
anything else gets the plain fallback, never an error."""

from __future__ import annotations

import re

import pytest

from cronhooks_admin.schedule_words import describe, fallback, style
from cronhooks_common.cron import MACROS, CronSchedule

FORMS = [
    # the contract's example
    ("0 9 * * 1-5", "At 09:00, Monday through Friday"),
    # plain times, every minute / hour
    ("* * * * *", "Every minute"),
    ("*/1 * * * *", "Every minute"),
    ("0-59 * * * *", "Every minute"),
    ("0 * * * *", "Every hour"),
    ("0 0 * * *", "At 00:00"),
    ("5 4 * * *", "At 04:05"),
    ("59 23 31 12 *", "At 23:59, on day 31 of the month, only in December"),
    ("0 22 * * 1-5", "At 22:00, Monday through Friday"),
    # lists and ranges
    ("0 9,17 * * *", "At 09:00 and 17:00"),
    ("15 9,17 * * 1-5", "At 09:15 and 17:15, Monday through Friday"),
    ("0,30 * * * *", "At 0 and 30 minutes past the hour"),
    ("1-5 * * * *", "Minutes 1 through 5 past the hour"),
    ("0 9-17 * * *", "Every hour, between 09:00 and 17:59"),
    ("0 1,2,3,4,5 * * *", "At 01:00, 02:00, 03:00, 04:00 and 05:00"),
    ("5 9,17,20 * * *", "At 09:05, 17:05 and 20:05"),
    # a list of hours after a minutes phrase is hours, not times (`*/30 9,17` fires at 09:30)
    ("*/30 9,17 * * *", "Every 30 minutes, in the hours 09:00–09:59 and 17:00–17:59"),
    (
        "0,30 9,17 * * *",
        "At 0 and 30 minutes past the hour, in the hours 09:00–09:59 and 17:00–17:59",
    ),
    ("* 9,17 * * *", "Every minute, in the hours 09:00–09:59 and 17:00–17:59"),
    (
        "15,45 9-11,14 * * *",
        "At 15 and 45 minutes past the hour, in the hours 09:00 through 11:59 and 14:00–14:59",
    ),
    ("* 2 * * *", "Every minute, between 02:00 and 02:59"),
    ("0 9 * * 1,3-5", "At 09:00, only on Monday and Wednesday through Friday"),
    ("0 9 1,15 * *", "At 09:00, on day 1 and 15 of the month"),
    # steps
    ("*/5 * * * *", "Every 5 minutes"),
    ("5-59/15 * * * *", "Every 15 minutes, minutes 5 through 59 past the hour"),
    ("0 */2 * * *", "Every 2 hours"),
    ("0 8-18/2 * * 1-5", "Every 2 hours, between 08:00 and 18:59, Monday through Friday"),
    ("*/15 9-17 * * 1-5", "Every 15 minutes, between 09:00 and 17:59, Monday through Friday"),
    ("0 0 */2 * *", "At 00:00, every 2 days of the month"),
    ("0 0 * */3 *", "At 00:00, every 3 months"),
    # weekday steps as the days they name (the library reads `5-6/3` as "every 3 weeks")
    ("0 12 * * 1-5/2", "At 12:00, only on Monday, Wednesday, and Friday"),
    ("0 12 * * 5-6/3", "At 12:00, only on Friday"),
    ("0 12 * * */2", "At 12:00, only on Sunday, Tuesday, Thursday, and Saturday"),
    # a step inside a list, or a step of 1: the values it stands for
    ("*/20,5 * * * *", "At 0, 5, 20, and 40 minutes past the hour"),
    ("0 */12,5 * * *", "At 00:00, 05:00 and 12:00"),
    ("0 0 1 10-12/1 *", "At 00:00, on day 1 of the month, October through December"),
    ("0 0 1 */6,3 *", "At 00:00, on day 1 of the month, only in January, March, and July"),
    # names, any case; 7 and 0 are Sunday
    ("0 9 * * mon-fri", "At 09:00, Monday through Friday"),
    ("0 9 * * MON,wed,Fri", "At 09:00, only on Monday, Wednesday, and Friday"),
    ("0 9 * jan-mar *", "At 09:00, January through March"),
    ("0 9 1 JAN,jul *", "At 09:00, on day 1 of the month, only in January and July"),
    ("0 9 * * sun", "At 09:00, only on Sunday"),
    ("0 9 * * 7", "At 09:00, only on Sunday"),
    ("0 9 * * 0,7", "At 09:00, only on Sunday"),
    ("0 9 * * 5-7", "At 09:00, Friday through Sunday"),
    ("0 9 * * 6,0", "At 09:00, only on Saturday and Sunday"),
    # degenerate fields said plainly
    ("0 9 * * 3-3", "At 09:00, only on Wednesday"),
    ("0 9 1,1 * *", "At 09:00, on day 1 of the month"),
    ("0 9 1-5,3 * *", "At 09:00, between day 1 and 5 of the month"),
    ("0 9 * * mon-MON", "At 09:00, only on Monday"),
    ("0 9 * * 0-7", "At 09:00"),
    ("0 0 1-31 * *", "At 00:00"),
    # day-of-month and day-of-week as cron(8) combines them: "or" only when neither starts
    # with `*` (the library alone says "or" for the first and drops it for the second)
    ("0 9 */2 * 1", "At 09:00, every 2 days of the month, only on Monday"),
    ("0 9 1 * mon-fri", "At 09:00, on day 1 of the month, or on Monday through Friday"),
    ("0 9 1-7 * 1-5", "At 09:00, between day 1 and 7 of the month, or on Monday through Friday"),
    ("0 9 15 * 0", "At 09:00, on day 15 of the month, or on Sunday"),
    ("0 9 1 * 0-7", "At 09:00"),  # either day: every day
    ("0 9 1-31 * 1", "At 09:00"),
    # whitespace
    ("  0   9 * *   1-5 ", "At 09:00, Monday through Friday"),
    # macros
    ("@yearly", "At 00:00, on day 1 of the month, only in January"),
    ("@annually", "At 00:00, on day 1 of the month, only in January"),
    ("@monthly", "At 00:00, on day 1 of the month"),
    ("@weekly", "At 00:00, only on Sunday"),
    ("@daily", "At 00:00"),
    ("@midnight", "At 00:00"),
    ("@hourly", "Every hour"),
    ("@HOURLY", "Every hour"),
]


@pytest.mark.parametrize(("expression", "words"), FORMS)
def test_every_accepted_form_in_words(expression: str, words: str) -> None:
    CronSchedule.parse(expression, "UTC")  # a form cronhooks accepts
    assert describe(expression) == words


def test_every_macro_is_covered() -> None:
    assert set(MACROS) <= {e.lower() for e, _ in FORMS}


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        # The contract's DST cases (§2): a fixed time in a skipped hour, one in a repeated
        # hour, and a wall-clock job across both. The words are the zone's local time.
        ("30 2 * * *", "At 02:30"),
        ("30 1 * * *", "At 01:30"),
        ("*/30 1-2 * * *", "Every 30 minutes, between 01:00 and 02:59"),
        ("0 2 * 3 0", "At 02:00, only on Sunday, only in March"),
    ],
)
def test_dst_zone_schedules(expression: str, words: str) -> None:
    for zone in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe"):
        CronSchedule.parse(expression, zone)
    assert describe(expression) == words


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "61 * * * *",
        "0 9 L * *",
        "0 9 * * 1#2",
        "0 9 15W * *",
        "0 0 0 9 * * *",
        "0 9 30 2 *",
        "@fortnightly",
        "5/15 * * * *",
        "0 9 * * fri-sun",
    ],
)
def test_what_cronhooks_refuses_gets_the_fallback(expression: str) -> None:
    assert describe(expression) == fallback(" ".join(expression.split()))
    assert describe(expression).startswith("Cron schedule ")


def test_the_library_failing_gives_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import cronhooks_admin.schedule_words as words

    def broken(*_: object) -> str:
        raise RuntimeError("library bug")

    monkeypatch.setattr(words, "_words", broken)
    words.describe.cache_clear()
    try:
        assert words.describe("0 9 * * 1-5") == 'Cron schedule "0 9 * * 1-5"'
    finally:
        words.describe.cache_clear()


@pytest.mark.parametrize(
    ("library", "contract"),
    [
        (
            "At 0 minutes past the hour, between 09:00 and 17:59",
            "Every hour, between 09:00 and 17:59",
        ),
        ("At 0 and 30 minutes past the hour", "At 0 and 30 minutes past the hour"),
        ("At 00:00, every 2 days", "At 00:00, every 2 days of the month"),
        (
            "At 00:00, every 3 days, only in March",
            "At 00:00, every 3 days of the month, only in March",
        ),
        ("At 12:00, every 2 days of the week", "At 12:00, every 2 days of the week"),
    ],
)
def test_style_brings_the_library_to_the_contract(library: str, contract: str) -> None:
    assert style(library) == contract


def test_style_refuses_twelve_hour_times() -> None:
    with pytest.raises(ValueError):
        style("At 09:00 AM")


@pytest.mark.parametrize(("expression", "_words"), FORMS)
def test_times_are_24_hour_and_days_full(expression: str, _words: str) -> None:
    words = describe(expression)
    assert not re.search(r"\b(AM|PM)\b", words)
    assert all(re.fullmatch(r"\d\d:\d\d", t) for t in re.findall(r"\d+:\d+", words))
    assert not re.search(r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b", words)
