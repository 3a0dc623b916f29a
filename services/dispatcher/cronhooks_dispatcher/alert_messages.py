"""What the alert sink receives for an alert event (CONTRACT §12). Pure.

The body has the contract's fields plus a one-line `text`, so Slack- or Telegram-style
incoming webhooks can show it as it comes; `webhook-id` is `alert-{id}-{stage}`, the same
on every try, so a receiver can drop a repeat.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from cronhooks_common.events import AlertFields, AlertResolved, Event, Kind
from cronhooks_dispatcher.alerts import stage

MAX_TEXT_ERROR = 200
RESOLVED_BECAUSE = {
    "recovered": "delivers again",
    "re_enabled": "was re-enabled",
    "deleted": "was deleted",
}


class AlertBody(TypedDict):
    """The alert POST's body (CONTRACT §12), keys in the order written."""

    type: str  # the event type: alert.raised or alert.resolved
    alert_id: int
    webhook_id: int
    kind: Kind
    url: str
    description: str
    consecutive_failures: int
    last_error: str | None
    disabled: bool
    admin_url: str
    occurred_at: str
    text: str
    trace: NotRequired[str]  # a chain alert (CONTRACT §11): the trace that reached the limit


def message_id(alert: AlertFields) -> str:
    return f"alert-{alert.alert_id}-{stage(alert)}"


def admin_url(public_url: str, webhook_id: int) -> str:
    return f"{public_url.rstrip('/')}/#webhook-{webhook_id}"


def text(alert: AlertFields) -> str:
    name = f"{alert.kind} webhook {alert.webhook_id}"
    if alert.description:
        name += f" ({alert.description})"
    if isinstance(alert, AlertResolved):
        why = RESOLVED_BECAUSE.get(alert.reason, "is resolved")
        line = f"[cronhooks] RESOLVED: {name} {why}"
    elif isinstance(alert.trace, str):
        # a chain alert (CONTRACT §11): no failures to count, a chain that grew too wide
        line = f"[cronhooks] ALERT: {name}: {alert.last_error or 'chain_limit'}"
    else:
        failures = alert.consecutive_failures
        what = "is disabled after" if alert.disabled else "has"
        noun = "failed delivery" if failures == 1 else "consecutive failed deliveries"
        line = f"[cronhooks] ALERT: {name} {what} {failures} {noun}"
        if alert.last_error:
            line += f"; last error: {alert.last_error[:MAX_TEXT_ERROR]}"
    return " ".join(line.split())  # one line, whatever the error said


def body(event: Event, alert: AlertFields, public_url: str) -> AlertBody:
    """The POST's body for the alert event `event` (its typed data: `alert`)."""
    out: AlertBody = {
        "type": event.type,
        "alert_id": alert.alert_id,
        "webhook_id": alert.webhook_id,
        "kind": alert.kind,
        "url": alert.url,
        "description": alert.description,
        "consecutive_failures": alert.consecutive_failures,
        "last_error": alert.last_error,
        "disabled": alert.disabled,
        "admin_url": admin_url(public_url, alert.webhook_id),
        "occurred_at": event.to_json()["occurred_at"],
        "text": text(alert),
    }
    if isinstance(alert.trace, str):
        out["trace"] = alert.trace
    return out
