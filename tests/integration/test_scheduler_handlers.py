"""What the scheduler writes, key for key (3 of 3): its copy of a webhook and the cron
timer through created, updated (jitter), a late event, disabled and deleted; a trigger's
first fire and its retry, with the timers its handlers make; and what ends a poison
event."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.clock import iso
from cronhooks_common.events import Causation, NewEvent
from cronhooks_common.jitter import jitter_offset
from cronhooks_scheduler.faults import ending
from cronhooks_scheduler.firing import fire_due
from cronhooks_scheduler.handlers import HANDLERS
from tests.integration.test_fired_slots import CRON, MIN, NOW, event, timers, written


async def test_a_webhooks_copy_and_its_cron_timer(pool: asyncpg.Pool) -> None:
    config = {**CRON, "jitter_seconds": 0, "max_deliveries_per_day": None}
    created = {"webhook_id": 5, "kind": "cron", "config": config, "changed": sorted(config)}
    jittered = {**config, "jitter_seconds": 30}
    updated = {"webhook_id": 5, "kind": "cron", "config": jittered, "changed": ["jitter_seconds"]}

    async def handle(version: int, kind: str, data: dict[str, Any]) -> tuple[Any, ...]:
        async with pool.acquire() as conn, conn.transaction():
            await HANDLERS.handle(conn, event("webhook-5", version, NewEvent(kind, data)))
        row = await pool.fetchrow(
            "select stream_version, config, deleted, gone from scheduler.webhooks"
            " where webhook_id = 5"
        )
        return (*row.values(), (await timers(pool)).get("cron:5"))

    slot = NOW + 5 * MIN  # the first after the event's time (NOW)
    assert await handle(1, "webhook.created", created) == (
        1,
        {**config, "webhook_id": 5},
        False,
        False,
        ("cron", slot, {}),
    )
    assert await handle(2, "webhook.updated", updated) == (
        2,
        {**jittered, "webhook_id": 5},
        False,
        False,
        ("cron", slot + jitter_offset(5, 30), {}),
    )
    assert (await handle(1, "webhook.updated", updated))[0] == 2  # late: changes nothing
    disabled = {"webhook_id": 5, "kind": "cron", "reason": "failing"}
    assert await handle(3, "webhook.disabled", disabled) == (
        3,
        {**jittered, "webhook_id": 5, "enabled": False},
        False,
        True,
        None,
    )
    assert await handle(4, "webhook.deleted", {"webhook_id": 5, "kind": "cron"}) == (
        4,
        {**jittered, "webhook_id": 5, "enabled": False},
        True,
        True,
        None,
    )


ARMED = {
    "agent_id": 4,
    "job_id": "daily",
    "schedule_id": "0b5c2d1e-4f4a-4c39-9f1e-2a7d6c1b9e01",
    "instance_id": "i-1",
    "fire_at": iso(NOW),
    "fire_at_text": "2026-02-09T10:00:00+01:00",
    "callback_url": "http://agent.test/cb",
    "generation": 2,
    "dedup_key": None,
}


async def test_a_triggers_first_fire_and_its_retry(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await HANDLERS.handle(conn, event("job-4-daily", 3, NewEvent("trigger.armed", ARMED)))
    (kind, due, payload) = (await timers(pool))["trigger:4:daily"]
    assert (kind, due, payload) == ("trigger", NOW, ARMED)
    now = NOW + timedelta(milliseconds=7)

    assert await fire_due(pool, now=now) == 1
    [(stream, version, type_, data)] = await written(pool)
    fire_id = data["fire_id"]
    request = {
        "fire_id": fire_id,
        "agent_id": 4,
        "instance_id": "i-1",
        "job_id": "daily",
        "schedule_id": "0b5c2d1e-4f4a-4c39-9f1e-2a7d6c1b9e01",
        "fire_at": iso(NOW),
        "fire_at_text": "2026-02-09T10:00:00+01:00",
        "callback_url": "http://agent.test/cb",
        "generation": 2,
        "first_attempt_at": iso(now),
        "attempt": 1,
    }
    assert (stream, version, type_, data) == (f"fire-{fire_id}", 1, "trigger.requested", request)
    assert await timers(pool) == {}

    failed = {
        **request,
        "status": 503,
        "error": "HTTP 503",
        "duration_ms": 4,
        "retry_at": iso(NOW + MIN),
        "next_attempt": 2,
    }
    async with pool.acquire() as conn, conn.transaction():
        [stored] = await eventstore.append(
            conn,
            stream,
            [NewEvent("trigger.attempt_failed", failed)],
            expected_version=1,
            causation=Causation.new("test"),
            occurred_at=now,
        )
        await HANDLERS.handle(conn, stored)
    assert (await timers(pool))[f"fire-retry:{fire_id}"] == (
        "fire_retry",
        NOW + MIN,
        {**request, "attempt": 2, "after_version": 2, "stream": stream},
    )

    assert await fire_due(pool, now=NOW + MIN) == 1
    last = (await written(pool))[-1]
    assert last == (stream, 3, "trigger.requested", {**request, "attempt": 2})
    assert await timers(pool) == {}


def test_what_ends_a_poison_event() -> None:
    error = RuntimeError("no timer")
    attempt = {
        "delivery_id": 12,
        "webhook_id": 3,
        "kind": "cron",
        "attempt": 2,
        "scheduled_for": None,
        "trigger": "manual",
        "missed_count": 0,
        "status": "failed",
        "response_status": 500,
        "duration_ms": 9,
        "error": "HTTP 500",
        "started_at": iso(NOW),
        "request_body": "{}",
        "response_body": "no",
        "retry_at": iso(NOW + MIN),
        "next_attempt": 3,
    }
    ended = ending(event("delivery-12", 4, NewEvent("delivery.attempt_failed", attempt)), error)
    assert ended is not None and (ended.type, ended.data) == (
        "delivery.failed",
        {
            "delivery_id": 12,
            "webhook_id": 3,
            "kind": "cron",
            "attempt": 2,
            "scheduled_for": None,
            "trigger": "manual",
            "missed_count": 0,
            "status": "failed",
            "error": "internal error: RuntimeError: no timer",
            "response_status": None,
            "duration_ms": None,
        },
    )
    fire = {k: v for k, v in ARMED.items() if k != "dedup_key"}
    fire |= {"fire_id": "f-1", "attempt": 1, "first_attempt_at": iso(NOW)}
    failed = {
        **fire,
        "status": None,
        "error": "timeout",
        "duration_ms": None,
        "retry_at": iso(NOW + MIN),
        "next_attempt": 2,
    }
    ended = ending(event("fire-f-1", 2, NewEvent("trigger.attempt_failed", failed)), error)
    assert ended is not None and (ended.type, ended.data) == (
        "trigger.fired",
        {
            **fire,
            "status": None,
            "error": "internal error: RuntimeError: no timer",
            "duration_ms": None,
            "outcome": "failed",
        },
    )
    webhook = NewEvent("webhook.deleted", {"webhook_id": 3, "kind": "cron"})
    assert ending(event("webhook-3", 2, webhook), error) is None
