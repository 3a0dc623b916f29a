"""What the scheduler writes, key for key (1 of 3): the events its cron timers lead to —
slots on time, jittered, missed under SKIP and LATEST_ONCE, over budget — each slot
recorded once, the timers moved on. Every key and value is spelled out: the typed events
must write exactly what the dicts they replaced wrote (written against the code before
them, where it passes too). The retries are test_fired_retries.py; the handlers' timers,
a webhook's copy and the poison endings test_scheduler_handlers.py. The constants and
helpers here serve all three."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from cronhooks_common.clock import iso
from cronhooks_common.events import Event, NewEvent
from cronhooks_common.jitter import jitter_offset
from cronhooks_scheduler.firing import fire_due

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
CRON = {
    "cron_schedule": "*/5 * * * *",
    "timezone": "UTC",
    "enabled": True,
    "misfire_grace_seconds": 60,
    "catch_up_policy": "LATEST_ONCE",
    "concurrency_policy": "FORBID",
    "execution_group": "",
    "attach_notes": [],
    "url": "http://agent.test/hook",
    "instruction": "do it",
    "description": "",
    "timeout_seconds": 30,
    "pass_api_key": False,
    "read_patterns": ["*"],
    "write_patterns": ["out/*"],
    "max_depth": 1,
    "max_retries": 3,
}
TARGET = {
    "url": "http://agent.test/hook",
    "instruction": "do it",
    "timeout_seconds": 30,
    "pass_api_key": False,
    "read_patterns": ["*"],
    "write_patterns": ["out/*"],
    "max_depth": 1,
    "max_retries": 3,
    "concurrency_policy": "FORBID",
    "execution_group": "",
    "attach_notes": [],
    "timezone": "UTC",  # a cron webhook's costs count on days in its zone (maxCostPerDay)
}


async def webhook(
    pool: asyncpg.Pool, webhook_id: int, config: dict[str, Any], *, gone: bool = False
) -> None:
    await pool.execute(
        "insert into scheduler.webhooks (webhook_id, stream_version, config, deleted, gone)"
        " values ($1, 1, $2, false, $3)",
        webhook_id,
        {**config, "webhook_id": webhook_id},
        gone,
    )


async def cron_timer(pool: asyncpg.Pool, webhook_id: int, due: datetime) -> None:
    await pool.execute(
        "insert into scheduler.timers (timer_key, kind, subject, due_at) values ($1, 'cron', $2, $3)",
        f"cron:{webhook_id}",
        webhook_id,
        due,
    )


async def written(pool: asyncpg.Pool) -> list[tuple[str, int, str, dict[str, Any]]]:
    rows = await pool.fetch(
        "select stream, version, type, data from eventstore.events order by position"
    )
    return [(r["stream"], r["version"], r["type"], r["data"]) for r in rows]


async def timers(pool: asyncpg.Pool) -> dict[str, tuple[str, datetime, Any]]:
    rows = await pool.fetch("select timer_key, kind, due_at, payload from scheduler.timers")
    return {r["timer_key"]: (r["kind"], r["due_at"], r["payload"]) for r in rows}


def ids(events: list[tuple[str, int, str, dict[str, Any]]]) -> list[int]:
    return [data["delivery_id"] for _, _, _, data in events]


def event(stream: str, version: int, new: NewEvent) -> Event:
    return Event(new.event_id, new.type, stream, version, NOW, new.data, uuid.uuid4())


async def test_cron_slots_on_time_jittered_and_missed(pool: asyncpg.Pool) -> None:
    await webhook(pool, 1, CRON)
    await cron_timer(pool, 1, NOW)
    await webhook(pool, 2, {**CRON, "jitter_seconds": 60})
    offset = jitter_offset(2, 60)
    await cron_timer(pool, 2, NOW + offset)
    await webhook(pool, 3, {**CRON, "catch_up_policy": "SKIP"})
    await cron_timer(pool, 3, NOW - 20 * MIN)
    await webhook(pool, 4, CRON)  # LATEST_ONCE
    await cron_timer(pool, 4, NOW - 20 * MIN)
    await webhook(pool, 5, {**CRON, "catch_up_policy": "ALL", "max_deliveries_per_day": 1})
    await cron_timer(pool, 5, NOW - 10 * MIN)
    now = NOW + offset + timedelta(milliseconds=10)

    assert await fire_due(pool, now=now) == 5
    events = await written(pool)
    by_webhook: dict[int, list[tuple[str, int, str, dict[str, Any]]]] = {}
    for e in events:
        by_webhook.setdefault(e[3]["webhook_id"], []).append(e)
    for stream, version, _, data in events:
        assert (stream, version) == (f"delivery-{data['delivery_id']}", 1)

    def request(webhook_id: int, slot: datetime, delivery_id: int, **more: Any) -> dict[str, Any]:
        return {
            "delivery_id": delivery_id,
            "webhook_id": webhook_id,
            "kind": "cron",
            "attempt": 1,
            "trigger": "schedule",
            "scheduled_for": iso(slot),
            "missed_count": 0,
            "next_run_at": iso(NOW + 5 * MIN),
            "target": TARGET,
            **more,
        }

    [one] = by_webhook[1]
    assert one[2:] == ("delivery.requested", request(1, NOW, one[3]["delivery_id"]))
    [two] = by_webhook[2]
    ms = offset // timedelta(milliseconds=1)
    assert two[2:] == (
        "delivery.requested",
        request(2, NOW, two[3]["delivery_id"], jitter_offset_ms=ms),
    )
    on_time, skipped = by_webhook[3]
    assert on_time[2:] == ("delivery.requested", request(3, NOW, on_time[3]["delivery_id"]))
    assert skipped[2:] == (
        "delivery.skipped",
        {
            "delivery_id": skipped[3]["delivery_id"],
            "webhook_id": 3,
            "kind": "cron",
            "attempt": 0,
            "trigger": "schedule",
            "scheduled_for": iso(NOW - 5 * MIN),
            "status": "skipped",
            "reason": "missed",
            "skipped_count": 4,
            "first_skipped": iso(NOW - 20 * MIN),
            "policy": "SKIP",
            "next_run_at": iso(NOW + 5 * MIN),
        },
    )
    [latest] = by_webhook[4]
    assert latest[2:] == (
        "delivery.requested",
        request(4, NOW, latest[3]["delivery_id"], missed_count=4),
    )
    first, *over = by_webhook[5]
    assert first[2:] == (
        "delivery.requested",
        request(5, NOW - 10 * MIN, first[3]["delivery_id"]),
    )
    assert [(e[2], e[3]) for e in over] == [
        (
            "delivery.skipped",
            {
                "delivery_id": e[3]["delivery_id"],
                "webhook_id": 5,
                "kind": "cron",
                "attempt": 0,
                "trigger": "schedule",
                "scheduled_for": iso(slot),
                "status": "skipped",
                "reason": "budget",
                "skipped_count": 1,
                "first_skipped": iso(slot),
                "next_run_at": iso(NOW + 5 * MIN),
                "max_deliveries_per_day": 1,
                "day": "2026-02-09",
            },
        )
        for e, slot in zip(over, (NOW - 5 * MIN, NOW), strict=True)
    ]
    # Each slot recorded once, with its delivery id; the timers on the next slot.
    recorded = await pool.fetch("select webhook_id, slot, delivery_id from scheduler.slot_requests")
    assert sorted(r["delivery_id"] for r in recorded) == sorted(ids(events))
    assert {k: due for k, (_, due, _) in (await timers(pool)).items()} == {
        "cron:1": NOW + 5 * MIN,
        "cron:2": NOW + 5 * MIN + offset,
        "cron:3": NOW + 5 * MIN,
        "cron:4": NOW + 5 * MIN,
        "cron:5": NOW + 5 * MIN,
    }
