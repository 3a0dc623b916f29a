"""What a poison event left pending, ended by the scheduler (CONTRACT §15).

The consumer calls `end_by_fault` for an event it could not handle however often it tried,
before it would dead-letter the message. The scheduler's events that leave something
waiting on it are failed attempts: without their retry timer a delivery (or a fire) would
wait for nothing. So the delivery fails for good (`delivery.failed`, `internal error: …`;
the dispatcher releases its lanes when it sees it) and the fire ends failed
(`trigger.fired`), appended after the event on its stream, once (inbox). Anything else
is left to the dead-letter queue: nothing waits on it (a webhook's timer is rebuilt by its
next event; a delivery left pending is the watchdog's).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from cronhooks_common.clock import Clock
from cronhooks_common.consumer import PoisonHandler
from cronhooks_common.events import Event, EventType, NewEvent, delivery_fields
from cronhooks_common.faults import internal_error, poison_ender

INBOX = "scheduler.inbox"


def ending(event: Event, error: Exception) -> NewEvent | None:
    """The event that ends what `event` left waiting on a timer that was never made. Pure."""
    d: dict[str, Any] = event.data
    if event.type == EventType.DELIVERY_ATTEMPT_FAILED:
        return NewEvent(
            EventType.DELIVERY_FAILED,
            {
                **delivery_fields(d),
                "status": "failed",
                "error": internal_error(error),
                "response_status": None,
                "duration_ms": None,
            },
        )
    if event.type == EventType.TRIGGER_ATTEMPT_FAILED:
        fields = {k: v for k, v in d.items() if k not in ("retry_at", "next_attempt")}
        return NewEvent(
            EventType.TRIGGER_FIRED,
            {**fields, "status": None, "error": internal_error(error), "outcome": "failed"},
        )
    return None


def make_fault_ender(pool: asyncpg.Pool, clock: Clock) -> PoisonHandler:
    return poison_ender(pool, inbox=INBOX, actor="scheduler", clock=clock, ending=ending)
