"""maxCostPerDay for schedule slots (CONTRACT §16.4): once what a webhook's agents reported
on a day (in its zone) reaches a unit's limit, its later slots of that day become skips.

Runs in fire_due's transaction, after the slots were recorded and before the delivery
budget (budget.py), so a slot skipped here uses none of maxDeliveriesPerDay. The sums are
`shared.daily_costs` (cronhooks_common.daily_costs), which the dispatcher writes in the
transaction of each outcome event: committed state, read without a lock — a delivery
still on its way has not cost anything yet, and the limit is a brake for the slots after
the spending, not a reservation. The limit is read from the scheduler's copy of the
webhook when the slot fires: a change applies from the next slot. Only webhooks with a
limit are looked at: a batch without one issues no statement.
"""

from __future__ import annotations

from datetime import date, datetime

import asyncpg
import msgspec

from cronhooks_common import budget, daily_costs
from cronhooks_common.events import CostAmount, DeliveryRequested, DeliverySkipped
from cronhooks_scheduler.budget import slot_skipped
from cronhooks_scheduler.slot_events import SlotEvent
from cronhooks_scheduler.webhook_copy import Schedule

# Sums of floats drift (0.7 + 0.1 is 0.7999999999999999): a limit counts as reached within
# a billionth of itself, or three reports of 0.4 would not reach a limit of 1.2.
TOLERANCE = 1e-9


def reached(limits: tuple[CostAmount, ...], spent: dict[str, float]) -> CostAmount | None:
    """The first limit the day's sums reach, or None. Pure."""
    for limit in limits:
        if spent.get(limit.unit, 0.0) >= limit.amount * (1 - TOLERANCE):
            return limit
    return None


def over_cost_budget(request: DeliveryRequested, limit: CostAmount, day: date) -> DeliverySkipped:
    """The skip that takes the place of a slot's request once a cost limit is reached. Pure."""
    return msgspec.structs.replace(slot_skipped(request, "cost_budget", day), cost_limit=limit)


async def apply(
    conn: asyncpg.Connection,
    recorded: list[tuple[str, SlotEvent]],
    schedules: dict[int, Schedule],
) -> list[tuple[str, SlotEvent]]:
    """`recorded` with each schedule request of a day whose costs reached a limit turned
    into a `delivery.skipped` (reason `cost_budget`) on the same delivery stream."""
    limited: list[tuple[int, tuple[int, date]]] = []
    for i, (_, event) in enumerate(recorded):
        if not isinstance(event, DeliveryRequested):
            continue
        schedule = schedules[event.webhook_id]
        if not schedule.max_cost_per_day:
            continue
        assert event.scheduled_for is not None
        slot = datetime.fromisoformat(event.scheduled_for)
        limited.append((i, (event.webhook_id, budget.local_day(slot, schedule.timezone))))
    if not limited:
        return recorded
    spent = await daily_costs.spent(conn, [key for _, key in limited])
    out = list(recorded)
    for i, key in limited:
        limit = reached(schedules[key[0]].max_cost_per_day, spent[key])
        if limit is not None:
            stream, event = out[i]
            assert isinstance(event, DeliveryRequested)
            out[i] = (stream, over_cost_budget(event, limit, key[1]))
    return out
