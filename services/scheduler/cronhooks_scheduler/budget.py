"""maxDeliveriesPerDay for schedule slots (CONTRACT §13): over-budget slots become skips.

Runs in fire_due's transaction, after the slots were recorded in `slot_requests` (so a
slot requested before a crash or by another replica is never counted twice) and before
anything is appended. Only the requests of webhooks with a limit are looked at: for a
batch without one this issues no statement. The decision itself is the shared counter's
(cronhooks_common.budget): locked rows, so replicas and admin-api's manual requests agree.
"""

from __future__ import annotations

from datetime import date, datetime

import asyncpg
import msgspec

from cronhooks_common import budget
from cronhooks_common.events import UNSET, DeliveryRequested, DeliverySkipped
from cronhooks_common.events.delivery import SkipReason
from cronhooks_scheduler.slot_events import SlotEvent
from cronhooks_scheduler.webhook_copy import Schedule


def slot_skipped(request: DeliveryRequested, reason: SkipReason, day: date) -> DeliverySkipped:
    """The skip that takes the place of a slot's request on `day` (a budget's: `budget`
    here, `cost_budget` in cost_budget.py, which name their limit beside it). Pure."""
    assert request.scheduled_for is not None  # a slot's request names its slot
    return DeliverySkipped(
        delivery_id=request.delivery_id,
        webhook_id=request.webhook_id,
        kind=request.kind,
        attempt=0,
        trigger="schedule",
        scheduled_for=request.scheduled_for,
        status="skipped",
        reason=reason,
        # A catch-up delivery standing for earlier missed slots skips them all.
        skipped_count=1 + request.missed_count,
        first_skipped=request.scheduled_for,
        next_run_at=None if request.next_run_at is UNSET else request.next_run_at,
        day=day.isoformat(),
    )


def over_budget(request: DeliveryRequested, limit: int, day: date) -> DeliverySkipped:
    """The skip of a slot's request beyond its day's budget. Pure."""
    return msgspec.structs.replace(
        slot_skipped(request, "budget", day), max_deliveries_per_day=limit
    )


async def apply(
    conn: asyncpg.Connection,
    recorded: list[tuple[str, SlotEvent]],
    schedules: dict[int, Schedule],
) -> list[tuple[str, SlotEvent]]:
    """`recorded` with each schedule request beyond its day's budget turned into a
    `delivery.skipped` (reason `budget`) on the same delivery stream, in slot order."""
    budgeted: list[tuple[int, budget.DayKey, int]] = []
    for i, (_, event) in enumerate(recorded):
        if not isinstance(event, DeliveryRequested):
            continue
        schedule = schedules[event.webhook_id]
        limit = schedule.max_deliveries_per_day
        if limit is None:
            continue
        assert event.scheduled_for is not None
        day = budget.local_day(datetime.fromisoformat(event.scheduled_for), schedule.timezone)
        budgeted.append((i, (event.webhook_id, day), limit))
    if not budgeted:
        return recorded
    verdicts = await budget.admit(conn, [(key, limit) for _, key, limit in budgeted])
    out = list(recorded)
    for (i, (_, day), limit), fits in zip(budgeted, verdicts, strict=True):
        if not fits:
            stream, event = out[i]
            assert isinstance(event, DeliveryRequested)
            out[i] = (stream, over_budget(event, limit, day))
    return out
