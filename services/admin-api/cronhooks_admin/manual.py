"""The `delivery.requested` of a delivery an admin asked for (Run now, replay): attempt 1,
trigger `manual`, no slot, to the webhook's *current* target."""

from __future__ import annotations

from typing import Any

from cronhooks_common.events import EventType, NewEvent
from cronhooks_common.webhooks import WebhookState, target_of


def manual_request(
    state: WebhookState, webhook_id: int, delivery_id: int, **extra: Any
) -> NewEvent:
    """`extra`: what this kind of request adds (a change delivery's `changes` and `depth`,
    a replay's `replay_of`)."""
    data: dict[str, Any] = {
        "delivery_id": delivery_id,
        "webhook_id": webhook_id,
        "kind": state.kind,
        "attempt": 1,
        "trigger": "manual",
        "scheduled_for": None,
        "missed_count": 0,
        "target": target_of(state.config),
        **extra,
    }
    return NewEvent(EventType.DELIVERY_REQUESTED, data)
