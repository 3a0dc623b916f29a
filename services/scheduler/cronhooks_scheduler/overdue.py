"""What becomes of a delivery the watchdog finds overdue (watchdog.py).

* Postponed, when it waits its turn in a dispatcher (CONTRACT §17: over a destination's
  limits or hold it waits without an event, and must not fail for that wait): its
  timeout and GRACE count again from the end of its destination's hold, or from now while
  a live dispatcher tells it holds the delivery for long (`shared.destination_waiting`).
* Otherwise abandoned: the `delivery.failed` that ends it (`abandonment`, pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from cronhooks_common import destination_state
from cronhooks_common.destination_key import destination_of
from cronhooks_common.events import DeliveryFailed, DeliveryRequested, Event, delivery_fields
from cronhooks_common.faults import ABANDONED
from cronhooks_scheduler import queries


@dataclass(frozen=True, slots=True)
class Waits:
    """What the dispatchers make deliveries wait for now."""

    now: datetime
    holds: Mapping[str, datetime]  # destinations held, until when
    turns: frozenset[int]  # deliveries a live dispatcher has held for their turn for long


async def current(conn: asyncpg.Connection, now: datetime) -> Waits:
    holds = {h.destination: h.held_until for h in await destination_state.holds(conn, now)}
    return Waits(now, holds, await destination_state.long_waits(conn))


async def postponed(
    conn: asyncpg.Connection,
    row: Any,
    history: list[Event],
    waits: Waits,
    grace: timedelta,
) -> bool:
    """Move an overdue delivery's deadline on if it waits its turn: its timeout and
    `grace` from its destination's hold's end, or from now; True if it did."""
    until = held_until(history, waits.holds)
    if until is None and history and history[0].data.get("delivery_id") in waits.turns:
        until = waits.now
    if until is None:
        return False
    restart = until + timedelta(milliseconds=row["timeout_ms"]) + grace
    await conn.execute(queries.WATCH_MOVE, row["stream"], restart)
    return True


def held_until(history: list[Event], holds: Mapping[str, datetime]) -> datetime | None:
    """When the hold on the destination of the delivery's latest request ends; None when
    it is not held (or names no target)."""
    if not holds:
        return None
    for event in reversed(history):
        target = event.data.get("target")
        if isinstance(target, dict) and isinstance(target.get("url"), str):
            return holds.get(destination_of(target["url"]))
    return None


def abandonment(history: list[Event]) -> DeliveryFailed:
    """The `delivery.failed` that ends a delivery with this history (read as stored,
    whatever it holds). Pure."""
    first = history[0].data
    requests = [e.data for e in history if e.type == DeliveryRequested.TYPE]
    latest = requests[-1] if requests else first
    attempt = max(int(e.data.get("attempt") or 0) for e in history)
    return DeliveryFailed(
        **delivery_fields(
            {**first, "attempt": attempt, "trigger": latest.get("trigger", "schedule")}
        ),
        status="failed",
        error=ABANDONED,
        response_status=None,
        duration_ms=None,
    )
