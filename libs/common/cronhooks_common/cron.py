"""Cron expressions in a time zone: pure functions, no I/O, time passed in (CONTRACT §2).

Used by the scheduler (timers) and by admin-api (`nextRunAt`, `nextRuns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class CronError(ValueError):
    """An expression or zone that cannot be used; `field` names the input it came from."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def parse_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError("timezone", f"unknown IANA time zone {name!r}") from None


@dataclass(frozen=True, slots=True)
class CronSchedule:
    expression: str
    zone: ZoneInfo

    @classmethod
    def parse(cls, expression: str, timezone: str) -> CronSchedule:
        zone = parse_zone(timezone)
        text = expression.strip()
        expanded = MACROS.get(text.lower(), text)
        if text.startswith("@") and text.lower() not in MACROS:
            raise CronError("cronSchedule", f"unknown macro {text!r}")
        if len(expanded.split()) != 5:
            raise CronError("cronSchedule", "expected 5 fields: minute hour day month weekday")
        try:
            croniter(expanded, datetime(2000, 1, 1, tzinfo=zone))
        except (CroniterError, ValueError, KeyError) as exc:
            raise CronError("cronSchedule", str(exc) or "invalid expression") from None
        return cls(expanded, zone)

    def next_after(self, moment: datetime) -> datetime:
        """The first slot strictly after `moment`, as aware UTC."""
        it = croniter(self.expression, moment.astimezone(self.zone))
        nxt: datetime = it.get_next(datetime)
        return nxt.astimezone(UTC)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        out: list[datetime] = []
        moment = after
        for _ in range(count):
            moment = self.next_after(moment)
            out.append(moment)
        return out
