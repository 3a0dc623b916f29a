"""A cron schedule in words (CONTRACT §17: `CronWebhook.scheduleDescription`): English,
24-hour `HH:MM`, full weekday names — `0 9 * * 1-5` is "At 09:00, Monday through Friday".

The words come from cron-descriptor (a maintained library; we do not write our own
describer). Around it, four small steps make its output match cron(8) as cron.py runs it:

* macros are expanded, and fields the library words wrongly are written as the values
  they stand for first: repeats and one-value ranges (`0,7`, `3-3`: not "Sunday and
  Sunday"), a step inside a list or of 1, a weekday step (it reads `5-6/3` as "every 3
  weeks"), a field naming every value (`*`, where that means the same);
* the two day fields are described apart and joined by cron(8)'s rule — "or" only when
  neither field starts with `*` — because the library decides "or" by other rules (it says
  "or on Monday" for `*/2 * 1`, which must match both, and drops the "or" for `1 * 1-5`);
* after a minutes phrase, a list of hours is said as hours, not times (`_hours_not_times`);
* its wording is brought to the contract's style (`style`).

Anything the library cannot describe gets `Cron schedule "{expr}"`, never an error. Pure,
memoised: resolvers call it per row.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cron_descriptor import CasingTypeEnum, DescriptionTypeEnum, ExpressionDescriptor, Options

from cronhooks_common.cron import FIELDS, CronSchedule

# English whatever the machine's locale; 24-hour times; weekday 0 is Sunday (7 is too).
_OPTIONS = Options(
    casing_type=CasingTypeEnum.Sentence,
    verbose=False,
    day_of_week_start_index_zero=True,
    use_24hour_time_format=True,
    locale_code="en_US",
)
_MINUTE, _HOUR, _DOM, _MONTH, _DOW = range(5)


def fallback(expression: str) -> str:
    return f'Cron schedule "{expression}"'


@lru_cache(maxsize=4096)
def describe(expression: str) -> str:
    """`expression` (one cronhooks accepts) in words; the fallback for anything else."""
    plain = " ".join(expression.split())
    try:
        fields, either = _plain_fields(plain)
        return style(_words(fields, either=either))
    except Exception:  # the library's own errors, or a form it mis-parses: never fail
        return fallback(plain)


def _plain_fields(expression: str) -> tuple[list[str], bool]:
    """The five fields with macros expanded and odd fields written plainly, and whether a
    day matching either day field fires (cron(8)). Raises CronError for anything cron.py
    refuses."""
    schedule = CronSchedule.parse(expression, "UTC")
    parts = schedule.expression.split(" ")  # macros expanded
    values = [
        set(schedule.minutes),
        set(schedule.hours),
        set(schedule.days),
        set(schedule.months),
        set(schedule.weekdays),  # 7 is 0 here
    ]
    either = not (schedule.dom_star or schedule.dow_star)  # cron(8): a day matching either
    out = []
    for index, (part, (_, low, high, _names)) in enumerate(zip(parts, FIELDS, strict=True)):
        full = set(range(low, 7 if index == _DOW else high + 1))
        if values[index] == full and not (either and index in (_DOM, _DOW)):
            out.append("*")  # every value: `*` says the same
        elif _plain(part, index) and not _degenerate(parts, index, values[index]):
            out.append(part)  # as written: the library words these shapes well
        else:
            out.append(_compact(sorted(values[index]), week=index == _DOW))
    if either and (values[_DOM] == set(range(1, 32)) or values[_DOW] == set(range(7))):
        # "Either day field" with one of them naming every day: every day.
        out[_DOM] = out[_DOW] = "*"
        either = False
    return out, either


_VALUE = r"[0-9a-z]+"
_RANGE = rf"{_VALUE}(-{_VALUE})?"


def _plain(part: str, index: int) -> bool:
    """Shapes the library words right: `*`, `*/n`, `a-b/n` (n > 1; not for weekdays, where
    it reads `1-5/3` as "every 3 weeks"), and lists of values and ranges without steps.
    Anything else (a step inside a list, `/1`) is written as the values it stands for."""
    text = part.lower()
    if re.fullmatch(rf"{_RANGE}(,{_RANGE})*", text):
        return True
    base, _, step = text.partition("/")
    if not step.isdigit() or int(step) < 2 or index == _DOW:
        return False
    return base == "*" or re.fullmatch(rf"{_VALUE}-{_VALUE}", base) is not None


def _degenerate(parts: list[str], index: int, values: set[int]) -> bool:
    """Whether field `index` names a value twice (`0,7`, `1,1`, `1-5,3`) or has a one-value
    range (`3-3`): the library would say "Sunday and Sunday", "Wednesday through Wednesday"."""
    items = parts[index].split(",")
    if any(re.fullmatch(r"(\w+)-\1", item, re.IGNORECASE) for item in items):
        return True
    if len(items) == 1:
        return False
    size = 0
    for item in items:
        alone = ["*"] * 5
        alone[index] = item
        parsed = CronSchedule.parse(" ".join(alone), "UTC")
        size += len(
            (parsed.minutes, parsed.hours, parsed.days, parsed.months, parsed.weekdays)[index]
        )
    return size != len(values)


def _compact(values: list[int], *, week: bool) -> str:
    """`values` as the fewest ranges and single values: [1, 2, 3, 5] → "1-3,5". A week that
    holds Friday to Sunday but not Monday wraps through 7 (Friday through Sunday: "5-7")."""
    if week and {5, 6, 0} <= set(values) and 1 not in values:
        values = sorted(7 if v == 0 else v for v in values)
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ",".join(
        str(r[0]) if len(r) == 1 else f"{r[0]},{r[1]}" if len(r) == 2 else f"{r[0]}-{r[-1]}"
        for r in runs
    )


def _part(fields: list[str], kind: DescriptionTypeEnum) -> str:
    return str(ExpressionDescriptor(" ".join(fields), _OPTIONS).get_description(kind))


def _words(fields: list[str], *, either: bool) -> str:
    """The library's words, with the day fields joined by cron(8)'s rule (`either`: a day
    matching either field fires)."""
    time_of_day = _hours_not_times(_part(fields, DescriptionTypeEnum.TIMEOFDAY))
    # Each day field described as if the other were `*`: no "or" from the library.
    days = _part([*fields[:3], fields[_MONTH], "*"], DescriptionTypeEnum.DAYOFMONTH)
    weekdays = _part([*fields[:2], "*", *fields[3:]], DescriptionTypeEnum.DAYOFWEEK)
    if either:
        weekdays = ", or " + weekdays.removeprefix(", ").removeprefix("only ")
        if not weekdays.startswith(", or on ") and not weekdays.startswith(", or every "):
            weekdays = ", or on " + weekdays.removeprefix(", or ")
    month = _part(fields, DescriptionTypeEnum.MONTH)
    described = ExpressionDescriptor(" ".join(fields), _OPTIONS)
    text = described.transform_verbosity(
        f"{time_of_day}{days}{weekdays}{month}", use_verbose_format=False
    )
    return str(ExpressionDescriptor.transform_case(text, CasingTypeEnum.Sentence))


def _hours_not_times(text: str) -> str:
    """The library says "Every 30 minutes, at 09:00 and 17:00" for `*/30 9,17`, which fires
    at 09:30 too: after a minutes phrase, a list of hours is hours, not times."""
    head, sep, hours = text.partition(", at ")
    if not sep:
        return text
    hours = re.sub(r"\b(\d\d):00\b(?! through)", r"\1:00–\1:59", hours)
    return f"{head}, in the hours {hours}"


# The contract's style where the library's differs (each rule tested).
_STYLE = (
    # "At 0 minutes past the hour, between 09:00 and 17:59" → "Every hour, between …"
    (re.compile(r"^At 0 minutes past the hour\b"), "Every hour"),
    # A day-of-month step restarts each month (31st, then the 1st): say so.
    (re.compile(r", every (\d+) days(?= |,|$)(?! of)"), r", every \1 days of the month"),
)


def style(text: str) -> str:
    """The library's sentence in the contract's style."""
    for pattern, replacement in _STYLE:
        text = pattern.sub(replacement, text)
    if "AM" in text.split() or "PM" in text.split() or not text:
        raise ValueError("not the contract's 24-hour style")
    return text
