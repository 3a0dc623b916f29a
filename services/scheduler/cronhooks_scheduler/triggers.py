"""One-shot triggers of agents (CONTRACT §9) in the scheduler's timer table.

`trigger.armed` upserts the timer `trigger:{agent}:{job}` (a newer arming replaces the
due time in place; the payload carries `fire_at`, parsed for the due time, and
`fire_at_text`, the agent's spelling, through to `trigger.requested`); `trigger.cancelled`
removes it. When due, firing.py appends
`trigger.requested` to a fresh `fire-{uuid}` stream and deletes the timer; the dispatcher
calls the agent back. A failed callback comes back as `trigger.attempt_failed`, which
becomes a `fire-retry:{fire_id}` timer here.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_common.clock import iso
from cronhooks_common.events import Event, EventType, NewEvent
from cronhooks_scheduler.timers import TIMERS_CHANNEL

HANDLED = (EventType.TRIGGER_ARMED, EventType.TRIGGER_CANCELLED, EventType.TRIGGER_ATTEMPT_FAILED)


def trigger_key(agent_id: int, job_id: str) -> str:
    return f"trigger:{agent_id}:{job_id}"


async def on_trigger_event(conn: asyncpg.Connection, event: Event) -> None:
    d = event.data
    if event.type == EventType.TRIGGER_ARMED:
        await conn.execute(
            """
            insert into scheduler.timers (timer_key, kind, subject, due_at, payload)
            values ($1, 'trigger', $2, $3, $4)
            on conflict (timer_key) do update set due_at = excluded.due_at,
                payload = excluded.payload
            where (scheduler.timers.payload->>'generation')::int
                  < (excluded.payload->>'generation')::int
            """,
            trigger_key(d["agent_id"], d["job_id"]),
            d["agent_id"],
            datetime.fromisoformat(d["fire_at"]),
            d,
        )
    elif event.type == EventType.TRIGGER_CANCELLED:
        await conn.execute(
            "delete from scheduler.timers where timer_key = $1"
            " and (payload->>'generation')::int <= $2",
            trigger_key(d["agent_id"], d["job_id"]),
            d["generation"],
        )
    elif event.type == EventType.TRIGGER_ATTEMPT_FAILED:
        await conn.execute(
            """
            insert into scheduler.timers (timer_key, kind, subject, due_at, payload)
            values ($1, 'fire_retry', $2, $3, $4)
            on conflict (timer_key) do nothing
            """,
            f"fire-retry:{d['fire_id']}",
            d["agent_id"],
            datetime.fromisoformat(d["retry_at"]),
            {
                **_request_fields(d),
                "attempt": d["next_attempt"],
                "after_version": event.version,
                "stream": event.stream,
            },
        )
    await conn.execute("select pg_notify($1, '')", TIMERS_CHANNEL)


def _request_fields(d: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "fire_id",
        "agent_id",
        "instance_id",
        "job_id",
        "schedule_id",
        "fire_at",
        "callback_url",
        "generation",
        "first_attempt_at",
    )
    fields = {k: d.get(k) for k in keys}
    # The agent's own spelling of fire_at, echoed in the callback; absent from triggers
    # armed before it was recorded (the dispatcher then sends the normalised `fire_at`).
    if "fire_at_text" in d:
        fields["fire_at_text"] = d["fire_at_text"]
    return fields


def first_fire(payload: dict[str, Any], now: datetime) -> tuple[str, NewEvent]:
    """A due trigger timer → (stream, event) of the first callback attempt."""
    fire_id = str(uuid.uuid4())
    data = {
        **_request_fields(payload),
        "fire_id": fire_id,
        "attempt": 1,
        "first_attempt_at": iso(now),
    }
    return f"fire-{fire_id}", NewEvent(EventType.TRIGGER_REQUESTED, data)


def retry_fire(payload: dict[str, Any]) -> tuple[str, int, NewEvent]:
    """A due fire-retry timer → (stream, expected version, event) of the next attempt."""
    data = {**_request_fields(payload), "attempt": payload["attempt"]}
    return payload["stream"], payload["after_version"], NewEvent(EventType.TRIGGER_REQUESTED, data)
