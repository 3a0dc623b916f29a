"""The shape of a webhook's configuration as it travels in `webhook.*` events.

`webhook.created` and `webhook.updated` carry the whole configuration (snake_case keys
below; never the secret), so any consumer can keep its own copy by upserting it.
`delivery.requested` carries the `target`: the part the dispatcher needs to send.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from cronhooks_common import eventstore
from cronhooks_common.events import (
    CHANGE,
    CRON,
    UNSET,
    ConfigData,
    Target,
    WebhookConfig,
    WebhookConfigured,
    WebhookDeleted,
    WebhookDisabled,
    webhook_stream,
)

CONFIG_FIELDS: tuple[str, ...] = (
    "url",
    "cron_schedule",
    "timezone",
    "instruction",
    "pass_api_key",
    "timeout_seconds",
    "max_depth",
    "max_retries",
    "enabled",
    "description",
    "read_patterns",
    "write_patterns",
    "concurrency_policy",
    "catch_up_policy",
    "misfire_grace_seconds",
    "execution_group",  # CONTRACT §13; absent from configs written before it ("": none)
    "attach_notes",  # CONTRACT §13; absent from configs written before it ([]: none)
    "jitter_seconds",  # CONTRACT §13; absent before it: 0 (jitter.py)
    "max_deliveries_per_day",  # CONTRACT §13; null or absent: no limit (budget.py)
    "max_cost_per_day",  # CONTRACT §16.4; absent before it: [] (no limit)
    "run_timeout_seconds",  # CONTRACT §16.2; absent before it: 3600
    "signature_scheme",  # CONTRACT §17; absent before it: HMAC
    "retry_deadline_seconds",  # CONTRACT §17; absent before it: 0 (none)
)

# A change webhook's configuration (CONTRACT §11): its filter instead of a schedule.
CHANGE_CONFIG_FIELDS: tuple[str, ...] = (
    "url",
    "include_patterns",
    "exclude_patterns",
    "on_create",
    "on_update",
    "on_remove",
    "include_content",
    "instruction",
    "pass_api_key",
    "timeout_seconds",
    "max_depth",
    "max_retries",
    "enabled",
    "description",
    "read_patterns",
    "write_patterns",
    "run_timeout_seconds",  # CONTRACT §16.2; absent before it: 3600
    "signature_scheme",  # CONTRACT §17; absent before it: HMAC
    "retry_deadline_seconds",  # CONTRACT §17; absent before it: 0 (none)
)


def config_fields(kind: str) -> tuple[str, ...]:
    return CHANGE_CONFIG_FIELDS if kind == CHANGE else CONFIG_FIELDS


# What changing makes the scheduler recompute the next slot.
SCHEDULE_FIELDS: frozenset[str] = frozenset({"cron_schedule", "timezone", "enabled"})


def target_of(config: Mapping[str, Any] | WebhookConfig) -> Target:
    """What a delivery of the webhook is sent with (never the secret): every key written,
    the settings its kind lacks null. From the configuration as its events carry it
    (extra keys ignored), or typed."""
    if isinstance(config, WebhookConfig):
        given = ((name, getattr(config, name)) for name in Target.__struct_fields__)
        return Target(**{name: value for name, value in given if value is not UNSET})
    return msgspec.convert(config, Target)


@dataclass(frozen=True, slots=True)
class WebhookState:
    """A webhook as its own event stream tells it (the truth, not a read model)."""

    version: int
    config: ConfigData  # as stored: commands merge and compare it
    deleted: bool
    kind: str = CRON  # fixed at creation: `cron` or `change` (CONTRACT §11)

    @property
    def live(self) -> bool:
        """Exists and is enabled: what an api_token minted for it needs."""
        return not self.deleted and bool(self.config.get("enabled"))


async def load_webhook(
    conn: asyncpg.Connection | asyncpg.Pool, webhook_id: int
) -> WebhookState | None:
    """Fold the webhook's stream; None if it never existed."""
    events = await eventstore.read_stream(conn, webhook_stream(webhook_id))
    if not events:
        return None
    config: ConfigData = {}
    deleted = False
    kind = str(events[0].data.get("kind", CRON))
    for event in events:
        payload = event.payload
        if isinstance(payload, WebhookConfigured):
            stored: ConfigData = event.data["config"]
            config = stored.copy()  # changed below
        elif isinstance(payload, WebhookDisabled):
            config["enabled"] = False
        elif isinstance(payload, WebhookDeleted):
            deleted = True
    return WebhookState(events[-1].version, config, deleted, kind)
