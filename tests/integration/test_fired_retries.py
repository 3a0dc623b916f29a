"""What the scheduler writes, key for key (2 of 3): the events its retry timers lead to —
the next request with the webhook's current target, the delivery's end when the webhook
was deleted, disabled or is unknown, and a change delivery's retry with the changes of
its first request — and the timer its handler makes of a failed attempt."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.clock import iso
from cronhooks_common.events import Causation, NewEvent
from cronhooks_scheduler.firing import fire_due
from cronhooks_scheduler.handlers import HANDLERS
from tests.integration.test_fired_slots import (
    CRON,
    MIN,
    NOW,
    TARGET,
    timers,
    webhook,
    written,
)

CHANGE = {
    "url": "http://agent.test/change",
    "instruction": "notes changed",
    "description": "",
    "enabled": True,
    "timeout_seconds": 20,
    "pass_api_key": True,
    "read_patterns": ["*"],
    "write_patterns": [],
    "max_depth": 2,
    "max_retries": 1,
    "include_patterns": ["a/*"],
    "exclude_patterns": [],
    "on_create": True,
    "on_update": True,
    "on_remove": False,
    "include_content": False,
}


async def delivery(
    pool: asyncpg.Pool, webhook_id: int, first: dict[str, Any], *, error: str, **more: Any
) -> tuple[str, int]:
    """A delivery whose first attempt failed, its retry due now: the failed attempt (with
    `more` keys) goes through the scheduler's handler, which makes the retry timer."""
    delivery_id = await pool.fetchval("select nextval('eventstore.delivery_ids')")
    stream = f"delivery-{delivery_id}"
    fields = {
        "delivery_id": delivery_id,
        "webhook_id": webhook_id,
        "kind": first.get("kind", "cron"),
        "attempt": 1,
        "scheduled_for": first.get("scheduled_for"),
        "trigger": first["trigger"],
        "missed_count": 0,
    }
    failed = NewEvent(
        "delivery.attempt_failed",
        {
            **fields,
            "status": "failed",
            "response_status": 500,
            "duration_ms": 12,
            "error": error,
            "retry_at": iso(NOW),
            "next_attempt": 2,
            **more,
        },
    )
    requested = NewEvent("delivery.requested", {**fields, **first})
    async with pool.acquire() as conn, conn.transaction():
        stored = await eventstore.append(
            conn,
            stream,
            [requested, failed],
            expected_version=0,
            causation=Causation.new("test"),
            occurred_at=NOW - MIN,
        )
        await HANDLERS.handle(conn, stored[1])
    return stream, delivery_id


async def test_retries_their_cancellations_and_a_change_deliverys(pool: asyncpg.Pool) -> None:
    await webhook(pool, 6, CRON)
    await webhook(pool, 7, CRON)
    await pool.execute("update scheduler.webhooks set deleted = true where webhook_id = 7")
    await webhook(pool, 8, CRON, gone=True)
    await webhook(pool, 9, CHANGE)
    slot = {"scheduled_for": iso(NOW - 60 * MIN), "trigger": "schedule", "target": TARGET}
    live, live_id = await delivery(pool, 6, slot, error="HTTP 500")
    deleted, deleted_id = await delivery(pool, 7, slot, error="HTTP 502")
    disabled, disabled_id = await delivery(pool, 8, slot, error="")
    never, never_id = await delivery(pool, 99, slot, error="HTTP 500")  # no copy of it
    changes = [{"path": "a/x.md", "event": "update", "version": 3, "content_hash": "h"}]
    batch = str(uuid.uuid4())
    change = {
        "kind": "change",
        "trigger": "change",
        "target": {
            **TARGET,
            "concurrency_policy": None,
            "execution_group": None,
            "attach_notes": None,
        },
        "depth": 1,
        "batch_id": batch,
        "changes": changes,
    }
    # CONTRACT §17: the request time its retry deadline counts from goes on to the retry
    requested_at = iso(NOW - MIN)
    changed, changed_id = await delivery(
        pool, 9, change, error="timeout", requested_at=requested_at
    )
    assert (await timers(pool))[f"retry:{live_id}"] == (
        "retry",
        NOW,
        {
            "delivery_id": live_id,
            "webhook_id": 6,
            "kind": "cron",
            "attempt": 2,
            "scheduled_for": iso(NOW - 60 * MIN),
            "missed_count": 0,
            "previous_error": "HTTP 500",
            "after_version": 2,
        },
    )
    before = len(await written(pool))

    assert await fire_due(pool, now=NOW) == 5
    fired = {
        stream: (version, kind, data)
        for stream, version, kind, data in (await written(pool))[before:]
    }
    base = {
        "kind": "cron",
        "attempt": 2,
        "trigger": "retry",
        "scheduled_for": iso(NOW - 60 * MIN),
        "missed_count": 0,
    }
    assert fired[live] == (
        3,
        "delivery.requested",
        {
            **base,
            "delivery_id": live_id,
            "webhook_id": 6,
            "previous_error": "HTTP 500",
            "target": TARGET,
        },
    )
    for stream, delivery_id, webhook_id, why in (
        (deleted, deleted_id, 7, "deleted"),
        (disabled, disabled_id, 8, "disabled"),
        (never, never_id, 99, "deleted"),
    ):
        assert fired[stream] == (
            3,
            "delivery.failed",
            {
                **base,
                "delivery_id": delivery_id,
                "webhook_id": webhook_id,
                "attempt": 1,
                "status": "failed",
                "error": f"retry cancelled: the webhook was {why}",
                "response_status": None,
                "duration_ms": None,
            },
        )
    assert fired[changed] == (
        3,
        "delivery.requested",
        {
            "delivery_id": changed_id,
            "webhook_id": 9,
            "kind": "change",
            "attempt": 2,
            "trigger": "retry",
            "scheduled_for": None,
            "missed_count": 0,
            "previous_error": "timeout",
            "target": {
                "url": "http://agent.test/change",
                "instruction": "notes changed",
                "timeout_seconds": 20,
                "pass_api_key": True,
                "read_patterns": ["*"],
                "write_patterns": [],
                "max_depth": 2,
                "max_retries": 1,
                "concurrency_policy": None,
                "execution_group": None,
                "attach_notes": None,
            },
            "depth": 1,
            "batch_id": batch,
            "changes": changes,
            "requested_at": requested_at,
        },
    )
    assert await timers(pool) == {}
