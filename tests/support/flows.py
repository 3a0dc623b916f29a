"""Helpers for tests that drive the running services over GraphQL. `r` is anything with the
`graphql` and `urls` of tests.support.inprocess.Running: a Running, or a System."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import aiohttp
import asyncpg

from cronhooks_common import db
from tests.support.graphql import (
    CREATE_AGENT,
    CREATE_API_KEY,
    CREATE_CHANGE_WEBHOOK,
    CREATE_WEBHOOK,
    DELIVERY,
    PUSH_NOTES,
    TRIGGER_WEBHOOK,
)
from tests.support.inprocess import Running, eventually

if TYPE_CHECKING:
    from tests.support.system import System


async def create_webhook(
    r: Running | System, token: str, url: str, **fields: Any
) -> tuple[int, str]:
    """A cron webhook to `url` (yearly unless `cronSchedule` says otherwise): its id and
    its secret."""
    _status, body = await r.graphql(
        token, CREATE_WEBHOOK, {"input": {"url": url, "cronSchedule": "0 0 1 1 *", **fields}}
    )
    assert "errors" not in body, body
    payload = body["data"]["createCronWebhook"]
    return payload["cronWebhook"]["id"], payload["secret"]


async def create_change_webhook(
    r: Running | System, token: str, url: str, **fields: Any
) -> tuple[int, str]:
    """A change webhook to `url`: its id and its secret."""
    status, body = await r.graphql(token, CREATE_CHANGE_WEBHOOK, {"input": {"url": url, **fields}})
    assert status == 200 and "errors" not in body, body
    created = body["data"]["createChangeWebhook"]
    return int(created["changeWebhook"]["id"]), created["secret"]


async def push_notes(r: Running | System, token: str, *notes: tuple[str, str]) -> None:
    """Admin pushNotes of these (path, content) pairs; they must be taken."""
    updates = [{"path": p, "content": c} for p, c in notes]
    status, body = await r.graphql(token, PUSH_NOTES, {"input": {"updates": updates}})
    assert status == 200 and "errors" not in body, body
    assert body["data"]["pushNotes"]["__typename"] == "PushNotesPayload", body


async def create_api_key(
    r: Running | System, token: str, name: str, **fields: Any
) -> tuple[dict[str, Any], str]:
    """An API key (createApiKey): its row and the key itself."""
    status, body = await r.graphql(token, CREATE_API_KEY, {"input": {"name": name, **fields}})
    assert status == 200 and "errors" not in body, body
    created = body["data"]["createApiKey"]
    return created["apiKey"], created["key"]


async def trigger(r: Running | System, token: str, webhook_id: int) -> int:
    _, body = await r.graphql(token, TRIGGER_WEBHOOK, {"id": webhook_id})
    assert "errors" not in body, body
    return int(body["data"]["triggerCronWebhook"]["deliveryId"])


async def delivery(r: Running | System, token: str, delivery_id: int) -> dict[str, Any]:
    _, body = await r.graphql(token, DELIVERY, {"id": delivery_id})
    assert "errors" not in body, body
    return body["data"]["cronWebhookDelivery"]  # type: ignore[no-any-return]


async def finished(
    r: Running | System, token: str, delivery_id: int, timeout: float = 15
) -> dict[str, Any]:
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


async def fetchval(dsn: str, query: str, *args: Any) -> Any:
    """One value read from the test's database, on a connection of its own."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def event_count(dsn: str) -> int:
    """Every event in the store."""
    return int(await fetchval(dsn, "select count(*) from eventstore.events"))


async def timer_due(dsn: str, timer_key: str) -> datetime | None:
    """When the scheduler's timer of that key is due (None: there is none)."""
    return await fetchval(  # type: ignore[no-any-return]
        dsn, "select due_at from scheduler.timers where timer_key = $1", timer_key
    )


async def cron_due(dsn: str, webhook_id: int) -> datetime | None:
    """When the webhook's next slot is due on the scheduler's timer."""
    return await timer_due(dsn, f"cron:{webhook_id}")


async def retry_due(dsn: str, delivery_id: int) -> datetime | None:
    """When the delivery's retry is due (None: none is scheduled)."""
    return await timer_due(dsn, f"retry:{delivery_id}")


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


AGENT_TRIGGERS = """query($id: Int!) { agentTriggers(agentId: $id) {
  jobId state lastOutcome lastError } }"""


async def create_agent(
    r: Running | System, admin: str, callback_url: str, instance: str = "inst", **fields: Any
) -> tuple[str, int]:
    """An agent (createAgent) of that callback URL: its access token and its id."""
    status, body = await r.graphql(
        admin,
        CREATE_AGENT,
        {"input": {"instanceId": instance, "callbackUrl": callback_url, **fields}},
    )
    assert status == 200 and "errors" not in body, body
    created = body["data"]["createAgent"]
    return created["accessToken"], int(created["agent"]["id"])


async def agent_cron(
    r: Running | System, token: str | None, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    """METHOD /api/agent-cron/PATH of admin-api as an agent (its access token): the status
    and the answer."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            f"{r.urls['admin-api']}/api/agent-cron/{path}",
            json=body,
            headers={} if token is None else {"Authorization": f"Bearer {token}"},
        ) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def provision(r: Running | System, token: str, **fields: Any) -> Any:
    """Provision a trigger as the agent of `token` (job_id, fire_at, ...): the answer."""
    status, answer = await agent_cron(r, token, "POST", "provision", fields)
    assert status == 200, answer
    return answer


async def provision_now(
    r: Running | System, admin: str, callback_url: str, fire_at: str, instance: str = "inst"
) -> int:
    """An agent of that callback URL with one trigger, `j`, armed at `fire_at`; its id."""
    token, agent_id = await create_agent(r, admin, callback_url, instance)
    await provision(r, token, job_id="j", fire_at=fire_at)
    return agent_id


async def trigger_ended(r: Running | System, admin: str, agent_id: int) -> dict[str, Any]:
    """The agent's one trigger once it has left `armed`."""

    async def ended() -> dict[str, Any] | None:
        _, got = await r.graphql(admin, AGENT_TRIGGERS, {"id": agent_id})
        [job] = got["data"]["agentTriggers"]
        return job if job["state"] != "armed" else None

    return await eventually(ended, timeout=30)  # type: ignore[no-any-return]
