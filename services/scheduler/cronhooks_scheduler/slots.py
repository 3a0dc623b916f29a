"""What a due cron timer yields: which slots to deliver, which to skip, when next. Pure.

A slot seen more than `misfire_grace_seconds` after its time counts as missed (the
scheduler, or everything, was down). `catch_up_policy` decides what missed slots become:

* LATEST_ONCE (default): one delivery, for the most recent slot, whose `missed_count` says
  how many earlier slots it stands for;
* SKIP: no delivery for missed slots, one `delivery.skipped` record with their count;
  slots still within the grace period are delivered as usual;
* ALL: one delivery per missed slot, oldest first, at most `MAX_CATCH_UP`; the rest are
  recorded as skipped.

After a change of schedule, a pause or a restart the timer points at the next slot
after that moment, so only real outages produce missed slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

from cronhooks_common.cron import CronSchedule

MAX_CATCH_UP = 100
# How many slots one claim walks at most. Beyond it (an every-minute job down for a week)
# the count is a lower bound, so a claim never holds its transaction for long.
MAX_WALK = 20_000


@dataclass(frozen=True, slots=True)
class Delivery:
    slot: datetime
    missed_count: int = 0


@dataclass(frozen=True, slots=True)
class SlotPlan:
    deliveries: list[Delivery]
    skipped: list[datetime] = field(default_factory=list)
    skipped_count: int = 0  # >= len(skipped) when the walk was cut short
    next_due: datetime | None = None


@lru_cache(maxsize=65_536)
def _next_after(schedule: CronSchedule, moment: datetime) -> datetime | None:
    # A herd shares schedules and slots: thousands of timers ask the same question.
    return schedule.next_after(moment)


def plan_slots(
    schedule: CronSchedule, *, policy: str, grace_seconds: int, due_at: datetime, now: datetime
) -> SlotPlan:
    grace = timedelta(seconds=grace_seconds)
    if now - due_at <= grace:
        # The common case: on time (or late within grace). One slot per claim; a timer
        # that is still due afterwards is simply claimed again.
        return SlotPlan([Delivery(due_at)], next_due=_next_after(schedule, due_at))
    slots, uncounted, next_due = _walk(schedule, due_at, now)
    missed = [s for s in slots if now - s > grace]
    on_time = [s for s in slots if now - s <= grace]
    if policy == "SKIP":
        return SlotPlan([Delivery(s) for s in on_time], missed, len(missed) + uncounted, next_due)
    if policy == "ALL":
        sent, rest = missed[:MAX_CATCH_UP], missed[MAX_CATCH_UP:]
        return SlotPlan(
            [Delivery(s) for s in sent + on_time], rest, len(rest) + uncounted, next_due
        )
    # LATEST_ONCE
    return SlotPlan([Delivery(slots[-1], len(slots) - 1 + uncounted)], next_due=next_due)


def _walk(
    schedule: CronSchedule, due_at: datetime, now: datetime
) -> tuple[list[datetime], int, datetime | None]:
    """Slots from `due_at` up to `now`, how many were not walked, and the next slot after."""
    slots = [due_at]
    moment: datetime | None = due_at
    while len(slots) < MAX_WALK:
        assert moment is not None
        moment = _next_after(schedule, moment)
        if moment is None or moment > now:
            return slots, 0, moment
        slots.append(moment)
    # Too many to walk: jump to the last day before `now` and walk only that.
    tail_start = max(slots[-1], now - timedelta(days=1))
    tail: list[datetime] = []
    moment = _next_after(schedule, tail_start)
    while moment is not None and moment <= now:
        tail.append(moment)
        moment = _next_after(schedule, moment)
    # The slots between the walked head and the tail are not counted: a lower bound.
    return [*slots, *tail], 0, moment
