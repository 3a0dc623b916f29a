"""Alerts (CONTRACT §12): a webhook that keeps failing raises one, its recovery resolves it.

An alert is a stream of its own, `alert-{id}`: `alert.raised` when the webhook reaches
CRONHOOKS_ALERT_AFTER consecutive failed deliveries, `alert.raised` again with
`disabled: true` when it is auto-disabled (or a single one, if that comes first: 410
Gone), and `alert.resolved` when a delivery succeeds, an admin re-enables it (the count
starts again) or it is deleted. The open alert's id is kept on the webhook's health row
(`dispatcher.webhook_health.alert_id`); every caller here holds that row's lock (it has
just updated the row), so one transaction at a time decides about one webhook's alert,
on whichever replica: never two alerts for one spell, never a second resolve. The
events are appended in the transaction of the health change that causes them, so a
crash loses or doubles neither. With a sink configured, each event also leaves a row in
`dispatcher.alert_posts` in that transaction (sent by alert_sink.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.events import (
    AlertFields,
    AlertRaised,
    AlertResolved,
    Causation,
    Kind,
    NewEvent,
    alert_stream,
    storable,
)
from cronhooks_common.webhooks import load_webhook
from cronhooks_dispatcher import queries

log = structlog.get_logger(__name__)

ALERTS = Counter(
    "cronhooks_dispatcher_alerts_total",
    "Alert events appended (docs/reference/operations.md#alerts), by stage: raised,"
    " disabled, resolved",
    ["stage"],
)


def stage(alert: AlertFields) -> str:
    """`raised`, `disabled` or `resolved`: the last part of the POST's webhook-id."""
    if isinstance(alert, AlertResolved):
        return "resolved"
    return "disabled" if alert.disabled else "raised"


@dataclass(frozen=True)
class AlertPolicy:
    """How this process raises alerts; `wake` tells its sink that posts are owed."""

    alert_after: int = 3
    post: bool = False  # CRONHOOKS_ALERT_WEBHOOK_URL is set: queue a POST per event
    wake: Callable[[], None] = lambda: None

    def committed(self, alerts: Sequence[AlertFields]) -> None:
        """Call after the commit of the transaction that appended `alerts`."""
        for alert in alerts:
            ALERTS.labels(stage(alert)).inc()
            log.warning(
                "alert_" + stage(alert), alert_id=alert.alert_id, webhook_id=alert.webhook_id
            )
        if alerts and self.post:
            self.wake()


async def after_failure(
    conn: asyncpg.Connection,
    policy: AlertPolicy,
    *,
    webhook_id: int,
    kind: Kind,
    failures: int,
    error: str | None,
    disabled: bool,
    newly_disabled: bool,
    open_alert: int | None,
    causation: Causation,
    now: datetime,
) -> AlertRaised | None:
    """A failed delivery was counted (the health row is locked): raise, or re-raise as
    disabled, if it is time."""
    if open_alert is None and not (failures >= policy.alert_after or newly_disabled):
        return None
    if open_alert is not None and not newly_disabled:
        return None  # raised already; nothing new to say until it is disabled or recovers
    webhook = await load_webhook(conn, webhook_id)
    if webhook is None or webhook.deleted:
        return None  # an attempt that finished after its webhook was deleted
    if open_alert is None:
        alert_id: int = await conn.fetchval(queries.NEXT_ALERT_ID)
        await conn.execute(queries.OPEN_ALERT, webhook_id, alert_id)
        version = 0
    else:
        alert_id = open_alert
        version = await eventstore.stream_version(conn, alert_stream(alert_id))
    raised = AlertRaised(
        alert_id=alert_id,
        webhook_id=webhook_id,
        kind=kind,
        url=str(webhook.config.get("url", "")),
        description=str(webhook.config.get("description", "")),
        consecutive_failures=failures,
        last_error=None if error is None else storable(error),
        disabled=disabled,
    )
    await _append(conn, policy, version, raised, causation, now)
    return raised


async def resolve(
    conn: asyncpg.Connection,
    policy: AlertPolicy,
    *,
    alert_id: int,
    reason: Literal["recovered", "re_enabled", "deleted"],
    disabled: bool,
    causation: Causation,
    now: datetime,
) -> AlertResolved | None:
    """Close the open alert `alert_id` (the caller holds its webhook's health row)."""
    history = await eventstore.read_stream(conn, alert_stream(alert_id))
    if not history:
        return None
    raised = history[-1].payload
    if not isinstance(raised, AlertRaised):
        return None  # resolved already
    await conn.execute(queries.CLOSE_ALERT, raised.webhook_id, alert_id)
    # The webhook as it is now: an admin who fixed the URL sees the URL that works.
    webhook = await load_webhook(conn, raised.webhook_id)
    config = webhook.config if webhook is not None else {}
    resolved = AlertResolved(
        alert_id=raised.alert_id,
        webhook_id=raised.webhook_id,
        kind=raised.kind,
        url=str(config.get("url", raised.url)),
        description=str(config.get("description", raised.description)),
        consecutive_failures=0,
        last_error=raised.last_error,
        disabled=disabled,
        reason=reason,
    )
    await _append(conn, policy, history[-1].version, resolved, causation, now)
    return resolved


async def _append(
    conn: asyncpg.Connection,
    policy: AlertPolicy,
    version: int,
    alert: AlertFields,
    causation: Causation,
    now: datetime,
) -> None:
    [appended] = await eventstore.append(
        conn,
        alert_stream(alert.alert_id),
        [NewEvent.of(alert)],
        expected_version=version,
        causation=causation,
        occurred_at=now,
    )
    if policy.post:
        await conn.execute(queries.QUEUE_ALERT_POST, appended.event_id, alert.alert_id, now)
