"""Helpers for tests that drive the running services over GraphQL."""

from __future__ import annotations

from typing import Any

import asyncpg

from cronhooks_common import db
from tests.support.inprocess import Running, eventually

CREATE = """mutation($input: CreateCronWebhookInput!) { createCronWebhook(input: $input) {
  secret cronWebhook { id nextRunAt } } }"""
DELIVERY = """query($id: Int!) { cronWebhookDelivery(id: $id) {
  id status attempt trigger error responseStatus durationMs scheduledFor
  attempts { attempt requestBody responseStatus responseBody errorMessage durationMs startedAt }
} }"""


async def create_webhook(r: Running, token: str, url: str, **fields: Any) -> tuple[int, str]:
    _status, body = await r.graphql(
        token, CREATE, {"input": {"url": url, "cronSchedule": "0 0 1 1 *", **fields}}
    )
    assert "errors" not in body, body
    payload = body["data"]["createCronWebhook"]
    return payload["cronWebhook"]["id"], payload["secret"]


async def trigger(r: Running, token: str, webhook_id: int) -> int:
    _, body = await r.graphql(
        token, f"mutation {{ triggerCronWebhook(webhookId: {webhook_id}) {{ deliveryId }} }}"
    )
    assert "errors" not in body, body
    return int(body["data"]["triggerCronWebhook"]["deliveryId"])


async def delivery(r: Running, token: str, delivery_id: int) -> dict[str, Any]:
    _, body = await r.graphql(token, DELIVERY, {"id": delivery_id})
    return body["data"]["cronWebhookDelivery"]  # type: ignore[no-any-return]


async def finished(r: Running, token: str, delivery_id: int, timeout: float = 15) -> dict[str, Any]:
    """The delivery once it is no longer pending."""

    async def done() -> dict[str, Any] | None:
        d = await delivery(r, token, delivery_id)
        return d if d and d["status"] != "pending" else None

    return await eventually(done, timeout=timeout)  # type: ignore[no-any-return]


async def events_of(dsn: str, stream: str) -> list[asyncpg.Record]:
    conn = await db.connect(dsn, name="test")
    try:
        return await conn.fetch(
            "select type, version, data from eventstore.events where stream = $1 order by version",
            stream,
        )
    finally:
        await conn.close()


async def retry_due(dsn: str, delivery_id: int) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(
            "select due_at from scheduler.timers where timer_key = $1", f"retry:{delivery_id}"
        )
    finally:
        await conn.close()
