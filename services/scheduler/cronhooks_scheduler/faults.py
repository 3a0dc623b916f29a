"""What a poison event left pending, ended by the scheduler (CONTRACT §15).

The consumer calls `end_by_fault` for an event it could not handle however often it tried,
before it would dead-letter the message. The scheduler's events that leave something
waiting on it are failed attempts: without their retry timer a delivery (or a fire) would
wait for nothing. So `ending` says, by event class, what ends it: the delivery fails for
good (`delivery.failed`, `internal error: …`; the dispatcher releases its lanes when it
sees it) and the fire ends failed (`trigger.fired`), appended after the event on its
stream, once (inbox). Any other type is left to the dead-letter queue: nothing waits on
it (a webhook's timer is rebuilt by its next event; a delivery left pending is the
watchdog's).
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.clock import Clock
from cronhooks_common.consumer import PoisonHandler
from cronhooks_common.events import (
    DeliveryAttemptFailed,
    DeliveryFailed,
    FireFields,
    TriggerAttemptFailed,
    TriggerFired,
)
from cronhooks_common.faults import Endings, internal_error, poison_ender

INBOX = "scheduler.inbox"


def _delivery_fails(failed: DeliveryAttemptFailed, error: Exception) -> DeliveryFailed:
    return DeliveryFailed(
        **failed.fields(),
        status="failed",
        error=internal_error(error),
        response_status=None,
        duration_ms=None,
    )


def _fire_fails(failed: TriggerAttemptFailed, error: Exception) -> TriggerFired:
    fire = {name: getattr(failed, name) for name in FireFields.__struct_fields__}
    return TriggerFired(
        **fire,
        status=None,
        error=internal_error(error),
        outcome="failed",
        duration_ms=failed.duration_ms,
    )


# The event that ends what an event left waiting on a timer that was never made.
ending = Endings({DeliveryAttemptFailed: _delivery_fails, TriggerAttemptFailed: _fire_fails})


def make_fault_ender(pool: asyncpg.Pool, clock: Clock) -> PoisonHandler:
    return poison_ender(pool, inbox=INBOX, actor="scheduler", clock=clock, ending=ending)
