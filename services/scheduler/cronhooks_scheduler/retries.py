"""Retry timers: a failed attempt with attempts left becomes a durable timer.

`delivery.attempt_failed` (from the dispatcher) carries `retry_at`; this handler turns it
into a `retry:{delivery_id}` row of the same timer table the cron slots live in, so a
retry survives a restart of every process. When it is due, firing.py appends the next
`delivery.requested` (same delivery id, attempt + 1, trigger `retry`, `previous_error`)
with the webhook's current target.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cronhooks_common.events import CRON, Event
from cronhooks_scheduler.timers import TIMERS_CHANNEL


def retry_key(delivery_id: int) -> str:
    return f"retry:{delivery_id}"


async def on_attempt_failed(conn: asyncpg.Connection, event: Event) -> None:
    d = event.data
    payload = {
        "delivery_id": d["delivery_id"],
        "webhook_id": d["webhook_id"],
        "kind": d.get("kind", CRON),
        "attempt": d["next_attempt"],
        "scheduled_for": d.get("scheduled_for"),
        "missed_count": d.get("missed_count", 0),
        "previous_error": d.get("error") or "",
        # The next request follows this event on the delivery's stream.
        "after_version": event.version,
    }
    await conn.execute(
        """
        insert into scheduler.timers (timer_key, kind, subject, due_at, payload)
        values ($1, 'retry', $2, $3, $4)
        on conflict (timer_key) do nothing
        """,
        retry_key(d["delivery_id"]),
        d["webhook_id"],
        datetime.fromisoformat(d["retry_at"]),
        payload,
    )
    await conn.execute("select pg_notify($1, '')", TIMERS_CHANNEL)
