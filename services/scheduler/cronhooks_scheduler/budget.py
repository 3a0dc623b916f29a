"""maxDeliveriesPerDay for schedule slots (CONTRACT §13): over-budget slots become skips.

Runs in fire_due's transaction, after the slots were recorded in `slot_requests` (so a
slot requested before a crash or by another replica is never counted twice) and before
anything is appended. Only the requests of webhooks with a limit are looked at: for a
batch without one this issues no statement. The decision itself is the shared counter's
(cronhooks_common.budget): locked rows, so replicas and admin-api's manual requests agree.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import asyncpg

from cronhooks_common import budget
from cronhooks_common.events import EventType, NewEvent

Append = tuple[str, int, NewEvent, Any]


def _skip(event: NewEvent, limit: int, day: date) -> NewEvent:
    d = event.data
    return NewEvent(
        EventType.DELIVERY_SKIPPED,
        {
            "delivery_id": d["delivery_id"],
            "webhook_id": d["webhook_id"],
            "kind": d["kind"],
            "attempt": 0,
            "trigger": "schedule",
            "scheduled_for": d["scheduled_for"],
            "status": "skipped",
            "reason": "budget",
            # A catch-up delivery standing for earlier missed slots skips them all.
            "skipped_count": 1 + int(d.get("missed_count", 0)),
            "first_skipped": d["scheduled_for"],
            "next_run_at": d.get("next_run_at"),
            "max_deliveries_per_day": limit,
            "day": day.isoformat(),
        },
    )


async def apply(
    conn: asyncpg.Connection, appends: list[Append], configs: dict[int, dict[str, Any]]
) -> list[Append]:
    """`appends` with each schedule request beyond its day's budget turned into a
    `delivery.skipped` (reason `budget`) on the same delivery stream, in slot order."""
    budgeted: list[tuple[int, budget.DayKey, int]] = []
    for i, (_, _, event, _) in enumerate(appends):
        if event.type != EventType.DELIVERY_REQUESTED:
            continue
        webhook_id = event.data["webhook_id"]
        limit = budget.daily_limit(configs[webhook_id])
        if limit is None:
            continue
        slot = event.data["scheduled_for"]
        day = budget.local_day(datetime.fromisoformat(slot), configs[webhook_id]["timezone"])
        budgeted.append((i, (webhook_id, day), limit))
    if not budgeted:
        return appends
    verdicts = await budget.admit(conn, [(key, limit) for _, key, limit in budgeted])
    out = list(appends)
    for (i, (_, day), limit), fits in zip(budgeted, verdicts, strict=True):
        if not fits:
            stream, version, event, causation = out[i]
            out[i] = (stream, version, _skip(event, limit, day), causation)
    return out
