"""What the alert sink receives (CONTRACT §12): body fields, one-line text, webhook-id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from cronhooks_common.events import AlertFields, Event, EventType
from cronhooks_dispatcher import alert_messages

BASE = {
    "alert_id": 5,
    "webhook_id": 7,
    "kind": "cron",
    "url": "https://agent.example/hook",
    "description": "nightly digest",
    "consecutive_failures": 3,
    "last_error": "HTTP 500: down\nstack trace line",
    "disabled": False,
}


def event(type_: str, **data: Any) -> Event:
    return Event(
        event_id=uuid4(),
        type=type_,
        stream="alert-5",
        version=1,
        occurred_at=datetime(2026, 2, 9, 9, 0, tzinfo=UTC),
        data={**BASE, **data},
        correlation_id=uuid4(),
    )


def alert_of(e: Event) -> AlertFields:
    """The event's typed data, as the sink decodes it."""
    payload = e.payload
    assert isinstance(payload, AlertFields)
    return payload


def alert(type_: str, **data: Any) -> AlertFields:
    return alert_of(event(type_, **data))


def test_webhook_ids_name_the_alert_and_its_stage() -> None:
    assert alert_messages.message_id(alert(EventType.ALERT_RAISED)) == "alert-5-raised"
    disabled = alert(EventType.ALERT_RAISED, disabled=True, consecutive_failures=20)
    assert alert_messages.message_id(disabled) == "alert-5-disabled"
    resolved = alert(EventType.ALERT_RESOLVED, consecutive_failures=0, reason="recovered")
    assert alert_messages.message_id(resolved) == "alert-5-resolved"


def test_body_has_the_contract_fields_and_a_one_line_text() -> None:
    raised = event(EventType.ALERT_RAISED)
    body = alert_messages.body(raised, alert_of(raised), "https://cron.example/")
    assert {k: body[k] for k in BASE} == BASE
    assert body["type"] == "alert.raised"
    assert body["admin_url"] == "https://cron.example/#webhook-7"
    assert body["text"] == (
        "[cronhooks] ALERT: cron webhook 7 (nightly digest) has 3 consecutive failed"
        " deliveries; last error: HTTP 500: down stack trace line"
    )


def test_texts_of_disable_and_resolve() -> None:
    gone = alert(EventType.ALERT_RAISED, disabled=True, consecutive_failures=1, description="")
    assert alert_messages.text(gone).startswith(
        "[cronhooks] ALERT: cron webhook 7 is disabled after 1 failed delivery"
    )
    for reason, says in [
        ("recovered", "delivers again"),
        ("re_enabled", "was re-enabled"),
        ("deleted", "was deleted"),
    ]:
        resolved = alert(EventType.ALERT_RESOLVED, consecutive_failures=0, reason=reason)
        assert alert_messages.text(resolved) == (
            f"[cronhooks] RESOLVED: cron webhook 7 (nightly digest) {says}"
        )
