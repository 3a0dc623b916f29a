"""The pause switch for schedule slots (CONTRACT §16.4): while deliveries are paused, every
slot a cron timer yields becomes `delivery.skipped` (reason `paused`) — never caught up:
its timer moves on past it as for any other skip.

Runs first in fire_due's transaction, after the slots were recorded (one delivery id
each, unique per webhook and slot) and before the budgets, so a paused slot uses none of
maxCostPerDay's or maxDeliveriesPerDay's. Retries and agent-cron fires are not claimed
while paused (queries.HELD): they stay due and fire after the resume.
The switch itself is cronhooks_common.pause, read FOR SHARE by fire_due.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
import structlog

from cronhooks_common import pause
from cronhooks_common.budget import local_day
from cronhooks_common.clock import Clock
from cronhooks_common.events import UNSET, DeliveryRequested, DeliverySkipped
from cronhooks_scheduler.budget import slot_skipped
from cronhooks_scheduler.slot_events import SlotEvent
from cronhooks_scheduler.webhook_copy import Schedule

log = structlog.get_logger(__name__)


def paused_slot(request: DeliveryRequested, timezone: str) -> DeliverySkipped:
    """The skip that takes the place of a slot's request while paused. Pure."""
    assert request.scheduled_for is not None
    day = local_day(datetime.fromisoformat(request.scheduled_for), timezone)
    return msgspec.structs.replace(slot_skipped(request, "paused", day), day=UNSET)


def apply(
    recorded: list[tuple[str, SlotEvent]], schedules: dict[int, Schedule]
) -> list[tuple[str, SlotEvent]]:
    """`recorded` with every schedule request turned into a `paused` skip. Pure."""
    return [
        (stream, paused_slot(event, schedules[event.webhook_id].timezone))
        if isinstance(event, DeliveryRequested)
        else (stream, event)
        for stream, event in recorded
    ]


async def end_if_expired(pool: asyncpg.Pool, clock: Clock) -> pause.Pause:
    """The switch now; a pause whose `until` came is ended first, `deliveries.resumed`
    appended once whatever the number of replicas (pause.end_expired locks the row)."""
    switch = await pause.current(pool)
    now = clock.now()
    if not switch.expired(now):
        return switch
    async with pool.acquire() as conn, conn.transaction():
        switch = await pause.end_expired(conn, now)
    log.info("deliveries_resumed", automatic=True)
    return switch
