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
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.events import (
    Causation,
    Event,
    EventType,
    NewEvent,
    alert_stream,
    storable,
)
from cronhooks_common.webhooks import load_webhook

log = structlog.get_logger(__name__)

ALERTS = Counter(
    "cronhooks_dispatcher_alerts_total",
    "Alert events appended (CONTRACT §12), by stage: raised, disabled, resolved",
    ["stage"],
)


def stage(event: Event) -> str:
    """`raised`, `disabled` or `resolved`: the last part of the POST's webhook-id."""
    if event.type == EventType.ALERT_RESOLVED:
        return "resolved"
    return "disabled" if event.data.get("disabled") else "raised"


@dataclass(frozen=True)
class AlertPolicy:
    """How this process raises alerts; `wake` tells its sink that posts are owed."""

    alert_after: int = 3
    post: bool = False  # CRONHOOKS_ALERT_WEBHOOK_URL is set: queue a POST per event
    wake: Callable[[], None] = lambda: None

    def committed(self, events: Sequence[Event]) -> None:
        """Call after the commit of the transaction that appended `events`."""
        for event in events:
            ALERTS.labels(stage(event)).inc()
            log.warning(
                "alert_" + stage(event),
                alert_id=event.data["alert_id"],
                webhook_id=event.data["webhook_id"],
            )
        if events and self.post:
            self.wake()


async def after_failure(
    conn: asyncpg.Connection,
    policy: AlertPolicy,
    *,
    webhook_id: int,
    kind: str,
    failures: int,
    error: str | None,
    disabled: bool,
    newly_disabled: bool,
    open_alert: int | None,
    causation: Causation,
    now: datetime,
) -> Event | None:
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
        alert_id: int = await conn.fetchval("select nextval('dispatcher.alert_ids')")
        await conn.execute(
            "update dispatcher.webhook_health set alert_id = $2 where webhook_id = $1",
            webhook_id,
            alert_id,
        )
        version = 0
    else:
        alert_id = open_alert
        version = await eventstore.stream_version(conn, alert_stream(alert_id))
    data = {
        "alert_id": alert_id,
        "webhook_id": webhook_id,
        "kind": kind,
        "url": str(webhook.config.get("url", "")),
        "description": str(webhook.config.get("description", "")),
        "consecutive_failures": failures,
        "last_error": None if error is None else storable(error),
        "disabled": disabled,
    }
    return await _append(
        conn, policy, alert_id, version, NewEvent(EventType.ALERT_RAISED, data), causation, now
    )


async def resolve(
    conn: asyncpg.Connection,
    policy: AlertPolicy,
    *,
    alert_id: int,
    reason: str,
    disabled: bool,
    causation: Causation,
    now: datetime,
) -> Event | None:
    """Close the open alert `alert_id` (the caller holds its webhook's health row)."""
    stream = alert_stream(alert_id)
    history = await eventstore.read_stream(conn, stream)
    if not history or history[-1].type == EventType.ALERT_RESOLVED:
        return None
    raised: dict[str, Any] = history[-1].data
    webhook_id = int(raised["webhook_id"])
    await conn.execute(
        "update dispatcher.webhook_health set alert_id = null"
        " where webhook_id = $1 and alert_id = $2",
        webhook_id,
        alert_id,
    )
    # The webhook as it is now: an admin who fixed the URL sees the URL that works.
    webhook = await load_webhook(conn, webhook_id)
    config = webhook.config if webhook is not None else raised
    data = {
        **raised,
        "url": str(config.get("url", raised["url"])),
        "description": str(config.get("description", raised["description"])),
        "consecutive_failures": 0,
        "disabled": disabled,
        "reason": reason,
    }
    event = NewEvent(EventType.ALERT_RESOLVED, data)
    return await _append(conn, policy, alert_id, history[-1].version, event, causation, now)


async def _append(
    conn: asyncpg.Connection,
    policy: AlertPolicy,
    alert_id: int,
    version: int,
    event: NewEvent,
    causation: Causation,
    now: datetime,
) -> Event:
    [appended] = await eventstore.append(
        conn,
        alert_stream(alert_id),
        [event],
        expected_version=version,
        causation=causation,
        occurred_at=now,
    )
    if policy.post:
        await conn.execute(
            "insert into dispatcher.alert_posts (event_id, alert_id, due_at) values ($1, $2, $3)",
            appended.event_id,
            alert_id,
            now,
        )
    return appended
