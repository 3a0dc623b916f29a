"""Idempotency keys of createCronWebhook / createChangeWebhook (CONTRACT §15): a key sent
again within IDEMPOTENCY_WINDOW answers the webhook it created first, with its secret,
while that first answer is still true."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from cronhooks_admin.commands import queries as sql
from cronhooks_admin.errors import Conflict, NotFound
from cronhooks_common import eventstore
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import (
    WebhookDeleted,
    WebhookRef,
    WebhookSecretRotated,
    webhook_stream,
)

IDEMPOTENCY_WINDOW = timedelta(hours=24)


async def claim(conn: asyncpg.Connection, key: str, webhook_id: int, now: datetime) -> int | None:
    """Claim `key` for the webhook about to be created; or the webhook it created first
    (a key is kept IDEMPOTENCY_WINDOW: an older claim is taken over). Waits for a
    concurrent holder of the same key, then sees its row."""
    claimed = await conn.fetchval(sql.CLAIM_KEY, key, webhook_id, now, now - IDEMPOTENCY_WINDOW)
    if claimed is not None:
        return None
    first: int = await conn.fetchval(sql.KEY_OWNER, key)
    return first


async def first_secret(
    conn: asyncpg.Connection, secrets: SecretBox, webhook_id: int, kind: str
) -> str:
    """The first answer's secret, while it is still true (CONTRACT §15): a replay never
    reveals a secret again once it was rotated or replaced, nor a deleted webhook."""
    history = [e.payload for e in await eventstore.read_stream(conn, webhook_stream(webhook_id))]
    if any(isinstance(p, WebhookDeleted) for p in history):
        raise NotFound("webhook", webhook_id)
    first = history[0] if history else None
    if isinstance(first, WebhookRef) and first.kind != kind:
        raise Conflict(f"idempotency key already used for webhook {webhook_id} of another kind")
    if any(isinstance(p, WebhookSecretRotated) for p in history):
        raise Conflict(
            f"idempotency key already used for webhook {webhook_id}, whose secret has"
            " been rotated since: the first answer is no longer true"
        )
    sealed = await conn.fetchval(sql.SECRET, webhook_id)
    return secrets.open(sealed)
