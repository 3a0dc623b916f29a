"""How commands append: their typed events, in the caller's transaction, projected inline
(projections.apply.apply_batch), so the read models reflect a command before its answer
goes out; the live projector applies the same events again later, which changes nothing.
And the one aggregate commands load: a webhook, from its own stream (never a read model).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from cronhooks_admin.errors import NotFound
from cronhooks_admin.projections.apply import apply_batch
from cronhooks_common import eventstore
from cronhooks_common.events import Causation, Event, NewEvent, Payload
from cronhooks_common.webhooks import WebhookState, load_webhook


async def record(
    conn: asyncpg.Connection,
    stream: str,
    expected_version: int,
    payloads: Sequence[Payload],
    *,
    actor: str,
    now: datetime,
) -> list[Event]:
    """Append `payloads` to `stream` (at `expected_version`) as one command's events."""
    recorded = await eventstore.append(
        conn,
        stream,
        [NewEvent.of(p) for p in payloads],
        expected_version=expected_version,
        causation=Causation.new(actor=actor),
        occurred_at=now,
    )
    await apply_batch(conn, recorded)
    return recorded


async def record_next(
    conn: asyncpg.Connection, stream: str, payload: Payload, *, actor: str, now: datetime
) -> None:
    """Append after whatever the stream holds (callers hold the lock that orders them)."""
    version = await eventstore.stream_version(conn, stream)
    await record(conn, stream, version, [payload], actor=actor, now=now)


async def live_webhook(conn: asyncpg.Connection, webhook_id: int, kind: str | None) -> WebhookState:
    """The webhook as its stream tells it; NotFound when deleted or of the other kind
    (cron and change webhooks share one id space; `kind` None: either)."""
    state = await load_webhook(conn, webhook_id)
    if state is None or state.deleted or kind not in (None, state.kind):
        raise NotFound("webhook", webhook_id)
    return state


async def record_new_streams(
    conn: asyncpg.Connection,
    streams: Sequence[str],
    payloads: Sequence[Payload],
    *,
    actor: str,
    now: datetime,
) -> list[Event]:
    """One event on each of many new streams, in one statement, as one command (one
    correlation): `payloads[k]` starts `streams[k]`."""
    causation = Causation.new(actor=actor)
    appends = [
        (stream, 0, NewEvent.of(p), causation) for stream, p in zip(streams, payloads, strict=True)
    ]
    recorded = await eventstore.append_many(conn, appends, occurred_at=now)
    await apply_batch(conn, recorded)
    return recorded
