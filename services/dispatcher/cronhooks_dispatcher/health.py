"""Webhook health: disable a webhook that is gone (410) or keeps failing.

A small process manager with its own state (`dispatcher.webhook_health`): every finished
delivery updates the count of consecutive failures (counted by the RecordWriter, in the
transaction that records the outcome: `Rules.count`); at CRONHOOKS_AUTO_DISABLE_AFTER (or
at once for 410 Gone) it appends `webhook.disabled` to the webhook's stream, which stops
its schedule and shows `disabledReason`. The same row carries the webhook's open alert
(alerts.py). Its handlers: re-enabling a webhook (`webhook.updated`) resets the count,
deleting it (`webhook.deleted`) forgets it; either resolves its open alert.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.consumer import claim_event
from cronhooks_common.events import (
    AlertFields,
    Causation,
    Event,
    Kind,
    NewEvent,
    WebhookDeleted,
    WebhookDisabled,
    WebhookUpdated,
    webhook_stream,
)
from cronhooks_dispatcher import alerts as alert_rules
from cronhooks_dispatcher import queries
from cronhooks_dispatcher.alerts import AlertPolicy
from cronhooks_dispatcher.deps import Call

log = structlog.get_logger(__name__)

APPEND_TRIES = 5


@dataclass(frozen=True, slots=True)
class Health:
    """How a delivery ended, for its webhook's health."""

    webhook_id: int
    succeeded: bool
    gone: bool
    error: str | None
    kind: Kind = "cron"  # of the webhook (its webhook.disabled says so)


@dataclass(frozen=True, slots=True)
class Rules:
    disable_after: int  # CRONHOOKS_AUTO_DISABLE_AFTER
    alerts: AlertPolicy

    async def count(
        self, conn: asyncpg.Connection, ended: Sequence[tuple[Health, Causation]], now: datetime
    ) -> list[AlertFields]:
        """Count finished deliveries; the alert events this raised or resolved."""
        raised: list[AlertFields] = []
        by_webhook = {h.webhook_id: causation for h, causation in ended if h.succeeded}
        if by_webhook:
            # A success costs nothing more unless it ends a failing spell (queries.RECOVER).
            successes = sorted(by_webhook)
            recovered = await conn.fetch(queries.RECOVER, successes)
            await conn.execute(queries.ENSURE_HEALTH, successes)
            for row in recovered:
                if row["alert_id"] is not None:
                    resolved = await alert_rules.resolve(
                        conn,
                        self.alerts,
                        alert_id=row["alert_id"],
                        reason="recovered",
                        disabled=row["disabled"],
                        causation=by_webhook[row["webhook_id"]],
                        now=now,
                    )
                    raised += [resolved] if resolved else []
        for h, causation in ended:  # failures are rare, and each may disable its webhook
            if not h.succeeded:
                alert = await self.count_failure(conn, h, causation, now)
                raised += [alert] if alert else []
        return raised

    async def count_failure(
        self, conn: asyncpg.Connection, h: Health, causation: Causation, now: datetime
    ) -> AlertFields | None:
        return await record_failure(
            conn,
            webhook_id=h.webhook_id,
            gone=h.gone,
            error=h.error,
            kind=h.kind,
            disable_after=self.disable_after,
            alerts=self.alerts,
            causation=causation,
            now=now,
        )


async def record_failure(
    conn: asyncpg.Connection,
    *,
    webhook_id: int,
    gone: bool,
    error: str | None,
    disable_after: int,
    alerts: AlertPolicy,
    kind: Kind = "cron",
    causation: Causation,
    now: datetime,
) -> AlertFields | None:
    """Count a failed delivery; disable the webhook and raise its alert when it is time.
    Returns the alert event appended, if any."""
    row = await conn.fetchrow(queries.COUNT_FAILURE, webhook_id)
    failures = row["consecutive_failures"]
    reason = None  # why it is disabled now, if it is
    if not row["disabled"] and gone:
        reason = "the agent answered 410 Gone"
    elif not row["disabled"] and failures >= disable_after:
        reason = f"{failures} consecutive failed deliveries"
        if error:
            reason += f" (last: {error})"
    if reason is not None:
        await conn.execute(queries.MARK_DISABLED, webhook_id)
        disabled = WebhookDisabled(webhook_id=webhook_id, kind=kind, reason=reason)
        await _append_disabled(conn, disabled, causation, now)
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
    conn: asyncpg.Connection, disabled: WebhookDisabled, causation: Causation, now: datetime
) -> None:
    stream = webhook_stream(disabled.webhook_id)
    for _ in range(APPEND_TRIES):
        version = await eventstore.stream_version(conn, stream)
        try:
            async with conn.transaction():  # an admin command may append meanwhile: retry
                await eventstore.append(
                    conn,
                    stream,
                    [NewEvent.of(disabled)],
                    expected_version=version,
                    causation=causation,
                    occurred_at=now,
                )
            return
        except eventstore.ConcurrencyError:
            continue
    raise eventstore.ConcurrencyError(stream, -1)


async def reset_health(call: Call, event: Event, update: WebhookUpdated) -> None:
    """Re-enabling a webhook gives it a clean slate: the count starts again, so its open
    alert is resolved (else nothing would ever close it: the next success finds a count of
    0 and touches nothing)."""
    deps = call.deps
    alerts = deps.writer.alerts
    resolved = None
    async with deps.pool.acquire() as conn, conn.transaction():
        if not await claim_event(conn, queries.INBOX, event):
            return
        if not ("enabled" in update.changed and update.config.enabled):
            return
        alert_id = await conn.fetchval(queries.RE_ENABLED, update.webhook_id)
        if alert_id is not None:
            resolved = await alert_rules.resolve(
                conn,
                alerts,
                alert_id=alert_id,
                reason="re_enabled",
                disabled=False,
                causation=Causation.following(event, actor="dispatcher"),
                now=deps.clock.now(),
            )
    alerts.committed([resolved] if resolved else [])


async def forget_health(call: Call, event: Event, deleted: WebhookDeleted) -> None:
    """A deleted webhook keeps no health, and its open alert is resolved (not left open
    forever)."""
    deps = call.deps
    alerts = deps.writer.alerts
    resolved = None
    async with deps.pool.acquire() as conn, conn.transaction():
        if not await claim_event(conn, queries.INBOX, event):
            return
        row = await conn.fetchrow(queries.FORGET_HEALTH, deleted.webhook_id)
        if row is not None and row["alert_id"] is not None:
            resolved = await alert_rules.resolve(
                conn,
                alerts,
                alert_id=row["alert_id"],
                reason="deleted",
                disabled=row["disabled"],
                causation=Causation.following(event, actor="dispatcher"),
                now=deps.clock.now(),
            )
    alerts.committed([resolved] if resolved else [])
