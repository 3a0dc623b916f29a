"""Webhook health: disable a webhook that is gone (410) or keeps failing.

A small process manager with its own state (`dispatcher.webhook_health`): every finished
delivery updates the count of consecutive failures; at CRONHOOKS_AUTO_DISABLE_AFTER (or
at once for 410 Gone) it appends `webhook.disabled` to the webhook's stream, which stops
its schedule and shows `disabledReason`. Re-enabling the webhook resets the count.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.consumer import claim_event
from cronhooks_common.events import CRON, Causation, Event, EventType, NewEvent, webhook_stream

log = structlog.get_logger(__name__)

APPEND_TRIES = 5


async def record_delivery(
    conn: asyncpg.Connection,
    *,
    webhook_id: int,
    succeeded: bool,
    gone: bool,
    error: str | None,
    disable_after: int,
    kind: str = CRON,
    causation: Causation,
    now: datetime,
) -> None:
    if succeeded:
        await conn.execute(
            """
            insert into dispatcher.webhook_health (webhook_id) values ($1)
            on conflict (webhook_id) do update set consecutive_failures = 0
            """,
            webhook_id,
        )
        return
    row = await conn.fetchrow(
        """
        insert into dispatcher.webhook_health (webhook_id, consecutive_failures) values ($1, 1)
        on conflict (webhook_id) do update
            set consecutive_failures = dispatcher.webhook_health.consecutive_failures + 1
        returning consecutive_failures, disabled
        """,
        webhook_id,
    )
    if row["disabled"]:
        return
    if gone:
        reason = "the agent answered 410 Gone"
    elif row["consecutive_failures"] >= disable_after:
        reason = f"{row['consecutive_failures']} consecutive failed deliveries"
        if error:
            reason += f" (last: {error})"
    else:
        return
    await conn.execute(
        "update dispatcher.webhook_health set disabled = true where webhook_id = $1", webhook_id
    )
    await _append_disabled(conn, webhook_id, kind, reason, causation, now)
    log.warning("webhook_disabled", webhook_id=webhook_id, reason=reason)


async def _append_disabled(
    conn: asyncpg.Connection,
    webhook_id: int,
    kind: str,
    reason: str,
    causation: Causation,
    now: datetime,
) -> None:
    stream = webhook_stream(webhook_id)
    for _ in range(APPEND_TRIES):
        version = await eventstore.stream_version(conn, stream)
        try:
            async with conn.transaction():  # an admin command may append meanwhile: retry
                await eventstore.append(
                    conn,
                    stream,
                    [
                        NewEvent(
                            EventType.WEBHOOK_DISABLED,
                            {"webhook_id": webhook_id, "kind": kind, "reason": reason},
                        )
                    ],
                    expected_version=version,
                    causation=causation,
                    occurred_at=now,
                )
            return
        except eventstore.ConcurrencyError:
            continue
    raise eventstore.ConcurrencyError(stream, -1)


async def on_webhook_updated(conn: asyncpg.Connection, event: Event, inbox: str) -> None:
    """Re-enabling a webhook gives it a clean slate."""
    if not await claim_event(conn, inbox, event.event_id):
        return
    changed = set(event.data.get("changed", []))
    if "enabled" in changed and event.data["config"].get("enabled"):
        await conn.execute(
            "update dispatcher.webhook_health set consecutive_failures = 0, disabled = false"
            " where webhook_id = $1",
            event.data["webhook_id"],
        )
