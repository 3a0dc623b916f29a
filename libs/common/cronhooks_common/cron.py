"""Cron expressions in a time zone, as cron(8) runs them: pure, no I/O, time passed in.

Used by the scheduler (timers, catch-up) and admin-api (`nextRunAt`, `nextRuns`).

Syntax (vixie/Debian cron): five fields `minute hour day-of-month month day-of-week`, each a
comma list of `*`, `N`, or `N-M`, where `*` and ranges may take a `/step`; month and
weekday names (`jan`, `mon`, any case); weekday 0 or 7 is Sunday; or one macro of
`@yearly @annually @monthly @weekly @daily @midnight @hourly`. As in cron(8), a step needs
`*` or a range before it (`5/15` is refused: write `5-59/15`).

Day matching: when neither day field starts with `*`, a day matching either fires;
otherwise a day must match both (so `*/2` in a day field counts as starred, as in cron(8)).

Daylight saving, following Debian's cron(8) as CONTRACT §2 fixes it:
* a job whose minute or hour field starts with `*` ("wildcard") follows the wall clock:
  it does not fire in a skipped interval and fires in both copies of a repeated one;
* any other job ("fixed-time") whose local time is skipped fires once at the first instant
  after the jump, and in a repeated hour fires only in the first occurrence.
Slots are instants; two local times that land on the same instant are one slot.
"""

from __future__ import annotations

import calendar
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
DAY_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
# (name, low, high, names) per field, in order.
FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, MONTH_NAMES),
    ("day-of-week", 0, 7, DAY_NAMES),
)
# The longest each month can be (February: in leap years).
LONGEST_MONTH = {m: 29 if m == 2 else calendar.monthrange(2001, m)[1] for m in range(1, 13)}
# Feb 29 of a leap year can be 8 years away (2096 → 2104); search a little beyond that.
MAX_SEARCH_DAYS = 366 * 9


class CronError(ValueError):
    """An expression or zone that cannot be used; `field` names the input it came from."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@lru_cache(maxsize=4096)
def cached_schedule(expression: str, timezone: str) -> CronSchedule:
    """`CronSchedule.parse`, memoised: the scheduler parses the same few schedules a lot."""
    return CronSchedule.parse(expression, timezone)


def parse_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError("timezone", f"unknown IANA time zone {name!r}") from None


def _number(text: str, field: str, low: int, high: int, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise CronError("cronSchedule", f"{field} field: {text!r} is not a number")
    value = int(text)
    if not low <= value <= high:
        raise CronError("cronSchedule", f"{field} field: {value} is outside {low}-{high}")
    return value


def _parse_field(
    text: str, field: str, low: int, high: int, names: dict[str, int] | None
) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError("cronSchedule", f"{field} field: empty list element")
        spec, slash, step_text = item.partition("/")
        if spec == "*":
            first, last = low, high
        elif "-" in spec:
            a, _, b = spec.partition("-")
            first = _number(a, field, low, high, names)
            last = _number(b, field, low, high, names)
            if first > last:
                raise CronError("cronSchedule", f"{field} field: range {spec} runs backwards")
        else:
            if slash:
                raise CronError(
                    "cronSchedule",
                    f"{field} field: a step needs * or a range before it "
                    f"(write {spec}-{high}/{step_text})",
                )
            values.add(_number(spec, field, low, high, names))
            continue
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(
                    "cronSchedule", f"{field} field: step {step_text!r} must be 1 or more"
                )
            step = int(step_text)
        values.update(range(first, last + 1, step))
    return values


@dataclass(frozen=True, slots=True)
class CronSchedule:
    expression: str
    zone: ZoneInfo
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_star: bool
    dow_star: bool
    wildcard: bool  # minute or hour field starts with `*`: follows the wall clock

    @classmethod
    def parse(cls, expression: str, timezone: str) -> CronSchedule:
        zone = parse_zone(timezone)
        text = " ".join(expression.split())
        if text.startswith("@"):
            if text.lower() not in MACROS:
                raise CronError("cronSchedule", f"unknown macro {text!r}")
            text = MACROS[text.lower()]
        parts = text.split(" ")
        if len(parts) != 5:
            raise CronError(
                "cronSchedule",
                f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}",
            )
        sets = [_parse_field(p, *spec) for p, spec in zip(parts, FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        schedule = cls(
            expression=text,
            zone=zone,
            minutes=tuple(sorted(sets[0])),
            hours=tuple(sorted(sets[1])),
            days=frozenset(sets[2]),
            months=frozenset(sets[3]),
            weekdays=weekdays,
            dom_star=parts[2].startswith("*"),
            dow_star=parts[4].startswith("*"),
            wildcard=parts[0].startswith("*") or parts[1].startswith("*"),
        )
        if not schedule._can_fire():
            raise CronError("cronSchedule", "never fires: no month has such a day")
        return schedule

    def _can_fire(self) -> bool:
        if not (self.dom_star or self.dow_star):
            return True  # either day field may match
        if not self.dow_star:
            return True  # every weekday occurs in every month
        return any(d <= LONGEST_MONTH[m] for m in self.months for d in self.days)

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        return dom and dow if self.dom_star or self.dow_star else dom or dow

    def next_after(self, moment: datetime) -> datetime | None:
        """The first slot strictly after `moment` (aware), as aware UTC; None if none."""
        moment = moment.astimezone(UTC)
        local = moment.astimezone(self.zone)
        day = local.date()
        last = day + timedelta(days=MAX_SEARCH_DAYS)
        while day <= last:
            if day.month not in self.months:
                # Skip the rest of a month the schedule never fires in.
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
                continue
            if self.day_matches(day):
                found = self._first_on_day_after(day, moment, local)
                if found is not None:
                    return found
            day += timedelta(days=1)
        return None

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        return list(self.iter_after(after, count))

    def iter_after(self, after: datetime, limit: int | None = None) -> Iterator[datetime]:
        moment: datetime | None = after
        produced = 0
        while limit is None or produced < limit:
            assert moment is not None
            moment = self.next_after(moment)
            if moment is None:
                return
            produced += 1
            yield moment

    def _first_on_day_after(self, day: date, moment: datetime, local: datetime) -> datetime | None:
        if _has_transition(self.zone, day):
            for instant in _day_instants(self, day):
                if instant > moment:
                    return instant
            return None
        # No offset change on this day: local order is instant order.
        if day == local.date():
            h_i = bisect_right(self.hours, local.hour) - 1
            if h_i >= 0 and self.hours[h_i] == local.hour:
                m_i = bisect_right(self.minutes, local.minute)
                if m_i < len(self.minutes):
                    return _at(day, local.hour, self.minutes[m_i], self.zone)
            h_i = bisect_right(self.hours, local.hour)
            if h_i == len(self.hours):
                return None
            return _at(day, self.hours[h_i], self.minutes[0], self.zone)
        return _at(day, self.hours[0], self.minutes[0], self.zone)


def _at(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=zone).astimezone(UTC)


@lru_cache(maxsize=8192)
def _has_transition(zone: ZoneInfo, day: date) -> bool:
    start = datetime.combine(day, time(0), tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)
    # On a plain day the offsets at both ends agree and the day lasts exactly 24 hours.
    return start.utcoffset() != end.utcoffset() or (
        end.astimezone(UTC) - start.astimezone(UTC)
    ) != timedelta(days=1)


@lru_cache(maxsize=4096)
def _day_instants(schedule: CronSchedule, day: date) -> tuple[datetime, ...]:
    """Every slot of a day on which the offset changes, applying the DST rules."""
    zone = schedule.zone
    instants: set[datetime] = set()
    for hour in schedule.hours:
        for minute in schedule.minutes:
            wall = datetime.combine(day, time(hour, minute))
            first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
            second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
            if first == second:
                instants.add(first)  # an ordinary local time
            elif _exists(first, wall, zone) and _exists(second, wall, zone):
                # Repeated local time: fixed-time jobs only in the first occurrence.
                instants.add(min(first, second))
                if schedule.wildcard:
                    instants.add(max(first, second))
            elif not schedule.wildcard:
                # Skipped local time: fixed-time jobs at the first instant after the jump.
                instants.add(_transition_between(min(first, second), max(first, second), zone))
    return tuple(sorted(instants))


def _exists(instant: datetime, wall: datetime, zone: ZoneInfo) -> bool:
    return instant.astimezone(zone).replace(tzinfo=None) == wall


def _transition_between(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first second in (before, after] whose UTC offset differs from `before`'s."""
    offset = before.astimezone(zone).utcoffset()
    low, high = int(before.timestamp()), int(after.timestamp())
    while high - low > 1:
        mid = (low + high) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == offset:
            low = mid
        else:
            high = mid
    return datetime.fromtimestamp(high, UTC)
