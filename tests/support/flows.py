"""Helpers for tests that drive the running services over GraphQL."""

from __future__ import annotations

from typing import Any

import aiohttp
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


async def scheduler_applied(dsn: str, webhook_ids: list[int]) -> None:
    """Wait until the scheduler has applied every event of these webhooks' streams. Its
    copy of a webhook and the webhook's timer follow the events, not the mutation's
    answer: a test that moves a ManualClock before then races the consumer (a timer made
    after the move starts from the later time and skips the slot the test expects)."""

    async def check() -> bool:
        conn = await asyncpg.connect(dsn)
        try:
            return bool(
                await conn.fetchval(
                    """
                    select count(*) = cardinality($1::bigint[])
                    from scheduler.webhooks w
                    where w.webhook_id = any($1::bigint[])
                      and w.stream_version = (select max(e.version) from eventstore.events e
                                              where e.stream = 'webhook-' || w.webhook_id)
                    """,
                    webhook_ids,
                )
            )
        finally:
            await conn.close()

    await eventually(check)


CREATE_AGENT = """mutation($i: CreateAgentInput!) { createAgent(input: $i) {
  accessToken agent { id } } }"""
AGENT_TRIGGERS = """query($id: Int!) { agentTriggers(agentId: $id) {
  jobId state lastOutcome lastError } }"""


async def provision_now(
    r: Running, admin: str, callback_url: str, fire_at: str, instance: str = "inst"
) -> int:
    """An agent of that callback URL with one trigger, `j`, armed at `fire_at`; its id."""
    _, body = await r.graphql(
        admin, CREATE_AGENT, {"i": {"instanceId": instance, "callbackUrl": callback_url}}
    )
    created = body["data"]["createAgent"]
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{r.urls['admin-api']}/api/agent-cron/provision",
            json={"job_id": "j", "fire_at": fire_at},
            headers={"Authorization": f"Bearer {created['accessToken']}"},
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
    return int(created["agent"]["id"])


async def trigger_ended(r: Running, admin: str, agent_id: int) -> dict[str, Any]:
    """The agent's one trigger once it has left `armed`."""

    async def ended() -> dict[str, Any] | None:
        _, got = await r.graphql(admin, AGENT_TRIGGERS, {"id": agent_id})
        [job] = got["data"]["agentTriggers"]
        return job if job["state"] != "armed" else None

    return await eventually(ended, timeout=30)  # type: ignore[no-any-return]
