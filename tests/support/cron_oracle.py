"""A slow, obviously-correct oracle for cron(8) semantics, used only by tests.

It shares no code with `cronhooks_common.cron`. It walks real time minute by minute the
way Debian's cron daemon does (cron.c): it keeps a "virtual" wall-clock minute and compares
it with the real wall clock each minute:

* one minute later: run every job matching the current minute;
* the wall clock jumped forward (spring forward): run wildcard jobs for the current minute
  and fixed-time jobs for every skipped minute up to now (all at this instant);
* the wall clock went back (fall back): run only wildcard jobs, for the current minute,
  until the clock has caught up. (Debian skips the single minute at which both clocks are
  equal; CONTRACT §2 says wildcard jobs run "in both copies", so the oracle runs it.)

Fires at the same instant are one slot. Used to arbitrate when the fast third-party
reference (cronsim) and our module disagree.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)
NAMES = {
    **{
        m: i
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
        )
    },
    **{d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
}
BOUNDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def _expand(field: str, low: int, high: int) -> set[int]:
    out: set[int] = set()
    for part in field.lower().split(","):
        base, _, step = part.partition("/")
        if base == "*":
            lo, hi = low, high
        elif "-" in base:
            a, b = base.split("-")
            lo, hi = NAMES.get(a) or int(a), NAMES.get(b) or int(b)
        else:
            lo = hi = NAMES[base] if base in NAMES else int(base)
        out.update(range(lo, hi + 1, int(step) if step else 1))
    return out


class Oracle:
    def __init__(self, expression: str, zone: str) -> None:
        fields = expression.split()
        sets = [_expand(f, lo, hi) for f, (lo, hi) in zip(fields, BOUNDS, strict=True)]
        self.minutes, self.hours, self.doms, self.months = sets[:4]
        self.dows = {d % 7 for d in sets[4]}
        self.either_day = not (fields[2].startswith("*") or fields[4].startswith("*"))
        self.wildcard = fields[0].startswith("*") or fields[1].startswith("*")
        self.zone = ZoneInfo(zone)

    def _matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minutes or wall.hour not in self.hours:
            return False
        if wall.month not in self.months:
            return False
        dom, dow = wall.day in self.doms, (wall.weekday() + 1) % 7 in self.dows
        return dom or dow if self.either_day else dom and dow

    def _wall(self, instant: datetime) -> datetime:
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def fires(self, start: datetime, end: datetime) -> list[datetime]:
        """Every slot in (start, end] as UTC instants."""
        # Start the "daemon" a few hours early, so that its virtual clock already knows
        # whether `start` falls in the first or the second copy of a repeated hour.
        t = start.astimezone(UTC).replace(second=0, microsecond=0) - timedelta(hours=4)
        virtual = self._wall(t)
        out: list[datetime] = []
        while t < end:
            t += MINUTE
            running = self._wall(t)
            diff = round((running - virtual) / MINUTE)
            if diff == 1:
                virtual = running
                fired = self._matches(running)
            elif diff > 1:  # wall clock jumped forward
                fired = self.wildcard and self._matches(running)
                while virtual < running:
                    virtual += MINUTE
                    fired = fired or (not self.wildcard and self._matches(virtual))
            else:  # wall clock went back: wildcard jobs only
                fired = self.wildcard and self._matches(running)
            if fired and t > start:
                out.append(t)
        return out
