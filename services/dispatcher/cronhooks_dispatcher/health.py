"""Webhook health: disable a webhook that is gone (410) or keeps failing.

A small process manager with its own state (`dispatcher.webhook_health`): every finished
delivery updates the count of consecutive failures; at CRONHOOKS_AUTO_DISABLE_AFTER (or
at once for 410 Gone) it appends `webhook.disabled` to the webhook's stream, which stops
its schedule and shows `disabledReason`. Re-enabling the webhook resets the count.
The same row carries the webhook's open alert (alerts.py).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.consumer import claim_event
from cronhooks_common.events import CRON, Causation, Event, EventType, NewEvent, webhook_stream
from cronhooks_dispatcher import alerts as alert_rules
from cronhooks_dispatcher.alerts import AlertPolicy

log = structlog.get_logger(__name__)

APPEND_TRIES = 5


async def record_failure(
    conn: asyncpg.Connection,
    *,
    webhook_id: int,
    gone: bool,
    error: str | None,
    disable_after: int,
    alerts: AlertPolicy,
    kind: str = CRON,
    causation: Causation,
    now: datetime,
) -> Event | None:
    """Count a failed delivery; disable the webhook and raise its alert when it is time.
    Returns the alert event appended, if any. (Successes are counted set-based by
    recording.py.)"""
    row = await conn.fetchrow(
        """
        insert into dispatcher.webhook_health (webhook_id, consecutive_failures) values ($1, 1)
        on conflict (webhook_id) do update
            set consecutive_failures = dispatcher.webhook_health.consecutive_failures + 1
        returning consecutive_failures, disabled, alert_id
        """,
        webhook_id,
    )
    failures = row["consecutive_failures"]
    reason = None  # why it is disabled now, if it is
    if not row["disabled"] and gone:
        reason = "the agent answered 410 Gone"
    elif not row["disabled"] and failures >= disable_after:
        reason = f"{failures} consecutive failed deliveries"
        if error:
            reason += f" (last: {error})"
    if reason is not None:
        await conn.execute(
            "update dispatcher.webhook_health set disabled = true where webhook_id = $1",
            webhook_id,
        )
        await _append_disabled(conn, webhook_id, kind, reason, causation, now)
        log.warning("webhook_disabled", webhook_id=webhook_id, reason=reason)
    return await alert_rules.after_failure(
        conn,
        alerts,
        webhook_id=webhook_id,
        kind=kind,
        failures=failures,
        error=error,
        disabled=row["disabled"] or reason is not None,
        newly_disabled=reason is not None,
        open_alert=row["alert_id"],
        causation=causation,
        now=now,
    )


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


async def on_webhook_updated(
    conn: asyncpg.Connection, event: Event, inbox: str, alerts: AlertPolicy, now: datetime
) -> Event | None:
    """Re-enabling a webhook gives it a clean slate: the count starts again, so its open
    alert is resolved (else nothing would ever close it: the next success finds a count of
    0 and touches nothing)."""
    if not await claim_event(conn, inbox, event):
        return None
    changed = set(event.data.get("changed", []))
    if not ("enabled" in changed and event.data["config"].get("enabled")):
        return None
    alert_id = await conn.fetchval(
        "update dispatcher.webhook_health set consecutive_failures = 0, disabled = false"
        " where webhook_id = $1 returning alert_id",
        event.data["webhook_id"],
    )
    if alert_id is None:
        return None
    return await alert_rules.resolve(
        conn,
        alerts,
        alert_id=alert_id,
        reason="re_enabled",
        disabled=False,
        causation=Causation.following(event, actor="dispatcher"),
        now=now,
    )


async def on_webhook_deleted(
    conn: asyncpg.Connection, event: Event, inbox: str, alerts: AlertPolicy, now: datetime
) -> Event | None:
    """A deleted webhook keeps no health, and its open alert is resolved (not left open
    forever)."""
    if not await claim_event(conn, inbox, event):
        return None
    row = await conn.fetchrow(
        "delete from dispatcher.webhook_health where webhook_id = $1 returning alert_id, disabled",
        event.data["webhook_id"],
    )
    if row is None or row["alert_id"] is None:
        return None
    return await alert_rules.resolve(
        conn,
        alerts,
        alert_id=row["alert_id"],
        reason="deleted",
        disabled=row["disabled"],
        causation=Causation.following(event, actor="dispatcher"),
        now=now,
    )
