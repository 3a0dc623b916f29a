"""The `delivery.requested` of a delivery an admin asked for (Run now, triggerChangeWebhook,
replay): attempt 1, trigger `manual`, no slot, to the webhook's *current* target."""

from __future__ import annotations

from typing import Literal

import msgspec

from cronhooks_common.change_payload import ChangePayload
from cronhooks_common.events import (
    CHANGE,
    UNSET,
    ChangeSent,
    DeliveryRequested,
    UnsetType,
)
from cronhooks_common.webhooks import WebhookState, target_of


def manual_request(
    state: WebhookState,
    webhook_id: int,
    delivery_id: int,
    *,
    replay_of: int | UnsetType = UNSET,
    depth: int | UnsetType = UNSET,
    payload: ChangePayload | None = None,
) -> DeliveryRequested:
    """`replay_of`: the delivery a replay sends again; a change delivery's `depth` and the
    `payload` of its notes (CONTRACT §11)."""
    changes: list[ChangeSent] | UnsetType = UNSET
    truncated: Literal[True] | UnsetType = UNSET
    if payload is not None:
        changes = msgspec.convert(payload.changes, list[ChangeSent])
        if payload.content_truncated:
            truncated = True  # only when the cap cut
    return DeliveryRequested(
        delivery_id=delivery_id,
        webhook_id=webhook_id,
        kind="change" if state.kind == CHANGE else "cron",
        attempt=1,
        scheduled_for=None,
        trigger="manual",
        missed_count=0,
        target=target_of(state.config),
        replay_of=replay_of,
        depth=depth,
        changes=changes,
        content_truncated=truncated,
    )
