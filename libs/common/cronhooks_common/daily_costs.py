"""What a webhook's agents reported they cost, per day of its zone and unit (CONTRACT
§16.1 `costTotals`, §16.4 `maxCostPerDay`).

`shared.daily_costs` is added to by whoever appends an event that reports costs, in the
transaction of the append (the dispatcher for attempts' outcomes, the importer for runs'
reports, CONTRACT §16.2): the sums are exactly what the event store holds, and a
rolled-back append adds nothing. Costs count on the day
they are reported, the event's time in the webhook's zone — not the slot's day: an answer
that comes after midnight is the next day's spending. The scheduler reads the day's sums
to skip slots over a limit; admin-api reads them for `costTotals`. Retention never deletes
a row: a total is an account, kept after the deliveries it sums have gone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime

import asyncpg

from cronhooks_common.budget import local_day
from cronhooks_common.events import CostAmount

# (webhook, day in its zone, unit)
CostKey = tuple[int, date, str]

_ADD = """
insert into shared.daily_costs as c (webhook_id, day, unit, amount)
select * from unnest($1::bigint[], $2::date[], $3::text[], $4::float8[])
on conflict (webhook_id, day, unit) do update set amount = c.amount + excluded.amount
"""

_SPENT = """
select c.webhook_id, c.day, c.unit, c.amount
from shared.daily_costs c
join unnest($1::bigint[], $2::date[]) as k(webhook_id, day) using (webhook_id, day)
"""


def reported(
    webhook_id: int, costs: Iterable[CostAmount], at: datetime, timezone: str
) -> dict[CostKey, float]:
    """The sums one report adds: its positive amounts on `at`'s day in the zone (a zero
    adds nothing, so every row of the table sums to more than zero). Pure."""
    day = local_day(at, timezone)
    added: dict[CostKey, float] = defaultdict(float)
    for cost in costs:
        if cost.amount > 0:
            added[(webhook_id, day, cost.unit)] += cost.amount
    return added


async def add(conn: asyncpg.Connection, added: dict[CostKey, float]) -> None:
    """Add the sums, in one statement. Keys are sorted, so two writers lock the rows they
    share in the same order and never wait on each other in a cycle."""
    keys = sorted(k for k, amount in added.items() if amount > 0)
    if not keys:
        return
    await conn.execute(
        _ADD,
        [k[0] for k in keys],
        [k[1] for k in keys],
        [k[2] for k in keys],
        [added[k] for k in keys],
    )


async def spent(
    conn: asyncpg.Connection, days: Iterable[tuple[int, date]]
) -> dict[tuple[int, date], dict[str, float]]:
    """What each (webhook, day) has cost so far, per unit (a day without costs: {})."""
    wanted = sorted(set(days))
    found: dict[tuple[int, date], dict[str, float]] = {key: {} for key in wanted}
    if not wanted:
        return found
    rows = await conn.fetch(_SPENT, [w for w, _ in wanted], [d for _, d in wanted])
    for row in rows:
        found[(row["webhook_id"], row["day"])][row["unit"]] = row["amount"]
    return found
