"""What a due timer leads to, by its kind: one small function per kind, in `KINDS`.

Each adds what its timer yields to the batch being fired (firing.py) and says when the
timer is due next (None: it is deleted):

* `cron` (timers.py): the slots the plan decides about (slot_events.py); due again at the
  next slot (+ the webhook's jitter offset);
* `retry` (retries.py): the delivery's next request, or its end if the webhook was
  deleted or disabled meanwhile;
* `trigger` (triggers.py): the first callback of an armed one-shot trigger, on a new
  stream;
* `fire_retry` (triggers.py): the next callback attempt of a fire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
import msgspec
import structlog
from prometheus_client import Counter

from cronhooks_common.events import (
    ArmedFields,
    DeliveryFailed,
    DeliveryRequested,
    delivery_stream,
)
from cronhooks_common.retry_deadline import DEADLINE_PASSED
from cronhooks_common.webhooks import target_of
from cronhooks_scheduler.retries import (
    Pending,
    RetryTimer,
    cancelled,
    ended,
    held_too_long,
    next_request,
)
from cronhooks_scheduler.slot_events import SlotRecord, plan_of, slot_records
from cronhooks_scheduler.triggers import FireRetryTimer, first_fire, retry_fire
from cronhooks_scheduler.webhook_copy import Schedule, schedule_of

log = structlog.get_logger(__name__)

RETRIES = Counter("cronhooks_scheduler_retries_total", "Retry timers fired", ["outcome"])


@dataclass(slots=True)
class Batch:
    """What one claim of due timers leads to, gathered timer by timer."""

    now: datetime
    slots: list[SlotRecord] = field(default_factory=list)  # recorded, then appended
    retries: list[Pending] = field(default_factory=list)  # after an event of their stream
    fires: list[Pending] = field(default_factory=list)  # new streams
    schedules: dict[int, Schedule] = field(default_factory=dict)  # of the slots' webhooks


# (batch, the claimed timer's row) -> when the timer is due next, None: it goes.
TimerKind = Callable[[Batch, asyncpg.Record], datetime | None]


def _cron(batch: Batch, row: asyncpg.Record) -> datetime | None:
    webhook_id, config = row["subject"], row["config"]
    if config is None or row["deleted"]:
        log.error("timer_without_webhook", timer_key=row["timer_key"])
        return None
    schedule = schedule_of(config)
    planned = plan_of(webhook_id, schedule, row["due_at"], batch.now)
    if planned is None:
        return None
    plan, offset = planned
    batch.slots.extend(slot_records(webhook_id, schedule, target_of(config), plan, offset))
    batch.schedules[webhook_id] = schedule
    return None if plan.next_due is None else plan.next_due + offset


def _retry(batch: Batch, row: asyncpg.Record) -> datetime | None:
    timer = msgspec.convert(row["payload"], RetryTimer)
    event: DeliveryRequested | DeliveryFailed
    outcome = "cancelled"  # the retry counter's label
    if row["config"] is None or row["deleted"]:
        event = cancelled(timer, "deleted")
    elif row["gone"]:
        event = cancelled(timer, "disabled")
    elif held_too_long(timer, target := target_of(row["config"]), row["due_at"], batch.now):
        # a pause held it past its deadline (§17)
        event, outcome = ended(timer, DEADLINE_PASSED), "deadline_passed"
    else:
        event, outcome = next_request(timer, target), "requested"
    RETRIES.labels(outcome).inc()
    batch.retries.append((delivery_stream(timer.delivery_id), timer.after_version, event))
    return None


def _trigger(batch: Batch, row: asyncpg.Record) -> datetime | None:
    stream, event = first_fire(msgspec.convert(row["payload"], ArmedFields), batch.now)
    batch.fires.append((stream, 0, event))
    return None


def _fire_retry(batch: Batch, row: asyncpg.Record) -> datetime | None:
    batch.retries.append(retry_fire(msgspec.convert(row["payload"], FireRetryTimer)))
    return None


def unknown(batch: Batch, row: asyncpg.Record) -> datetime | None:
    """A kind this scheduler does not know: the timer goes."""
    log.error("timer_kind_unknown", timer_key=row["timer_key"], kind=row["kind"])
    return None


KINDS: dict[str, TimerKind] = {
    "cron": _cron,
    "retry": _retry,
    "trigger": _trigger,
    "fire_retry": _fire_retry,
}
