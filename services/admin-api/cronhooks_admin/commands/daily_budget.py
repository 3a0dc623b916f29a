"""What admin commands do to a cron webhook's daily budget (CONTRACT §13,
`maxDeliveriesPerDay`; cronhooks_common.budget keeps the counts)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cronhooks_admin.commands import queries as sql
from cronhooks_common import budget
from cronhooks_common.events import CRON, UNSET, WebhookConfig
from cronhooks_common.webhooks import WebhookState


def _limit(config: WebhookConfig) -> int | None:
    """The webhook's limit, or None (no limit; absent from configs written before it)."""
    value = config.max_deliveries_per_day
    return None if value is UNSET else value


async def count_manual(
    conn: asyncpg.Connection, state: WebhookState, webhook_id: int, n: int, now: datetime
) -> None:
    """Manual requests use up the day's budget of a cron webhook with a limit: counted in
    the transaction that appends them, on today's date in its zone. They are sent even
    when the budget is spent — only slots are skipped."""
    if state.kind != CRON or budget.daily_limit(state.config) is None:
        return
    day = budget.local_day(now, state.config["timezone"])
    await budget.count_manual(conn, [(webhook_id, day)] * n)


async def seed(
    conn: asyncpg.Connection,
    webhook_id: int,
    before: WebhookConfig,
    after: WebhookConfig,
    now: datetime,
) -> None:
    """A limit set on a webhook that had none counts the day's deliveries so far
    ("once that many deliveries ... were requested in the current day"), from the
    delivery history. Slots the scheduler requested in the last moments before this
    command may not be projected yet; they are the ones "a change applies from the next
    slot" allows for."""
    if _limit(before) is not None or _limit(after) is None or after.timezone is UNSET:
        return  # counting already (the row is current), or no limit now
    day = budget.local_day(now, after.timezone)
    start, end = budget.day_bounds(day, after.timezone)
    requested = await conn.fetchval(sql.REQUESTED_BETWEEN, webhook_id, start, end)
    await budget.seed(conn, (webhook_id, day), requested)
