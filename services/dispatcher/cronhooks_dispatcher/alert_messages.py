"""What the alert sink receives for an alert event (CONTRACT §12). Pure.

The body has the contract's fields plus a one-line `text`, so Slack- or Telegram-style
incoming webhooks can show it as it comes; `webhook-id` is `alert-{id}-{stage}`, the same
on every try, so a receiver can drop a repeat.
"""

from __future__ import annotations

from typing import Any

from cronhooks_common.events import Event, EventType
from cronhooks_dispatcher.alerts import stage

MAX_TEXT_ERROR = 200


def message_id(event: Event) -> str:
    return f"alert-{event.data['alert_id']}-{stage(event)}"


def admin_url(public_url: str, webhook_id: int) -> str:
    return f"{public_url.rstrip('/')}/#webhook-{webhook_id}"


def text(event: Event) -> str:
    d = event.data
    name = f"{d['kind']} webhook {d['webhook_id']}"
    if d.get("description"):
        name += f" ({d['description']})"
    if event.type == EventType.ALERT_RESOLVED:
        why = {
            "recovered": "delivers again",
            "re_enabled": "was re-enabled",
            "deleted": "was deleted",
        }.get(d.get("reason", ""), "is resolved")
        line = f"[cronhooks] RESOLVED: {name} {why}"
    else:
        failures = d["consecutive_failures"]
        what = "is disabled after" if d["disabled"] else "has"
        noun = "failed delivery" if failures == 1 else "consecutive failed deliveries"
        line = f"[cronhooks] ALERT: {name} {what} {failures} {noun}"
        if d.get("last_error"):
            line += f"; last error: {d['last_error'][:MAX_TEXT_ERROR]}"
    return " ".join(line.split())  # one line, whatever the error said


def body(event: Event, public_url: str) -> dict[str, Any]:
    d = event.data
    return {
        "type": event.type,
        "alert_id": d["alert_id"],
        "webhook_id": d["webhook_id"],
        "kind": d["kind"],
        "url": d["url"],
        "description": d["description"],
        "consecutive_failures": d["consecutive_failures"],
        "last_error": d["last_error"],
        "disabled": d["disabled"],
        "admin_url": admin_url(public_url, d["webhook_id"]),
        "occurred_at": event.to_json()["occurred_at"],
        "text": text(event),
    }
