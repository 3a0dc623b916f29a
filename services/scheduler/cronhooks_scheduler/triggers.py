"""One-shot triggers of agents (CONTRACT §9) in the scheduler's timer table.

`trigger.armed` upserts the timer `trigger:{agent}:{job}` (a newer arming replaces the
due time in place; the payload carries `fire_at`, parsed for the due time, and
`fire_at_text`, the agent's spelling, through to `trigger.requested`); `trigger.cancelled`
removes it. When due (timer_kinds.py), `first_fire` appends `trigger.requested` to a
fresh `fire-{uuid}` stream and the timer goes; the dispatcher calls the agent back. A
failed callback comes back as `trigger.attempt_failed`, which becomes a
`fire-retry:{fire_id}` timer here, and `retry_fire` its next attempt.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
import msgspec

from cronhooks_common.clock import iso
from cronhooks_common.events import (
    ArmedFields,
    Event,
    FireFields,
    TriggerArmed,
    TriggerAttemptFailed,
    TriggerCancelled,
    TriggerRequested,
)
from cronhooks_scheduler import queries
from cronhooks_scheduler.timers import TIMERS_CHANNEL


def trigger_key(agent_id: int, job_id: str) -> str:
    return f"trigger:{agent_id}:{job_id}"


async def on_armed(conn: asyncpg.Connection, event: Event, payload: TriggerArmed) -> None:
    await conn.execute(
        queries.ARM_TRIGGER,
        trigger_key(payload.agent_id, payload.job_id),
        payload.agent_id,
        datetime.fromisoformat(payload.fire_at),
        payload.to_data(),  # the arming: its fires are made of it (ArmedFields)
    )
    await conn.execute(queries.NOTIFY, TIMERS_CHANNEL)


async def on_cancelled(conn: asyncpg.Connection, event: Event, payload: TriggerCancelled) -> None:
    await conn.execute(
        queries.CANCEL_TRIGGER, trigger_key(payload.agent_id, payload.job_id), payload.generation
    )
    await conn.execute(queries.NOTIFY, TIMERS_CHANNEL)


class FireRetryTimer(FireFields, frozen=True, kw_only=True):
    """A fire-retry timer's payload: the fire's next attempt, which follows
    `after_version` of the fire's stream."""

    after_version: int
    stream: str


def fire_retry_timer(event: Event, failed: TriggerAttemptFailed) -> FireRetryTimer:
    """The timer of a failed callback's next attempt."""
    return FireRetryTimer(
        agent_id=failed.agent_id,
        job_id=failed.job_id,
        schedule_id=failed.schedule_id,
        instance_id=failed.instance_id,
        fire_at=failed.fire_at,
        fire_at_text=failed.fire_at_text,
        callback_url=failed.callback_url,
        generation=failed.generation,
        fire_id=failed.fire_id,
        attempt=failed.next_attempt,
        first_attempt_at=failed.first_attempt_at,
        after_version=event.version,
        stream=event.stream,
    )


async def on_attempt_failed(
    conn: asyncpg.Connection, event: Event, payload: TriggerAttemptFailed
) -> None:
    await conn.execute(
        queries.ADD_FIRE_RETRY,
        f"fire-retry:{payload.fire_id}",
        payload.agent_id,
        datetime.fromisoformat(payload.retry_at),
        msgspec.to_builtins(fire_retry_timer(event, payload)),
    )
    await conn.execute(queries.NOTIFY, TIMERS_CHANNEL)


def _request(
    arming: ArmedFields, *, fire_id: str, attempt: int, first_attempt_at: str
) -> TriggerRequested:
    return TriggerRequested(
        agent_id=arming.agent_id,
        job_id=arming.job_id,
        schedule_id=arming.schedule_id,
        instance_id=arming.instance_id,
        fire_at=arming.fire_at,
        # the agent's own spelling, echoed in the callback; absent from triggers armed
        # before it was recorded (the dispatcher then sends the normalised `fire_at`)
        fire_at_text=arming.fire_at_text,
        callback_url=arming.callback_url,
        generation=arming.generation,
        fire_id=fire_id,
        attempt=attempt,
        first_attempt_at=first_attempt_at,
    )


def first_fire(armed: ArmedFields, now: datetime) -> tuple[str, TriggerRequested]:
    """A due trigger timer (its payload: the arming) → (stream, data) of the first
    callback attempt."""
    fire_id = str(uuid.uuid4())
    request = _request(armed, fire_id=fire_id, attempt=1, first_attempt_at=iso(now))
    return f"fire-{fire_id}", request


def retry_fire(timer: FireRetryTimer) -> tuple[str, int, TriggerRequested]:
    """A due fire-retry timer → (stream, expected version, data) of the next attempt."""
    request = _request(
        timer, fire_id=timer.fire_id, attempt=timer.attempt, first_attempt_at=timer.first_attempt_at
    )
    return timer.stream, timer.after_version, request
