"""What the answers recorded in a batch cost, added to their webhooks' days (CONTRACT
§16.1 `costTotals`, §16.4 `maxCostPerDay`; the table: cronhooks_common.daily_costs).

Runs in the RecordWriter's transaction, for the records whose event was appended: the
sums grow exactly with the outcome events that report costs. An attempt that waits for
the importer's verdict reports its costs with the outcome that verdict brings, so they
count once, on that day.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

import asyncpg

from cronhooks_common import daily_costs

if TYPE_CHECKING:  # record.py calls this module
    from cronhooks_dispatcher.record import Record


async def count(conn: asyncpg.Connection, records: Iterable[Record], now: datetime) -> None:
    """Add the costs the records' events report, on `now`'s day (their time) in each
    webhook's zone."""
    added: dict[daily_costs.CostKey, float] = {}
    for record in records:
        if record.attempt is None or "costs" not in record.event.data:
            continue
        request = record.attempt.request
        # A change webhook has no zone of its own: its days are UTC's, as in dailyStats.
        zone = request.target.timezone or "UTC"
        for key, amount in daily_costs.reported(
            request.webhook_id, record.attempt.report.costs, now, zone
        ).items():
            added[key] = added.get(key, 0.0) + amount
    await daily_costs.add(conn, added)
