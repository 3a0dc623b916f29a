"""The shape of a webhook's configuration as it travels in `webhook.*` events.

`webhook.created` and `webhook.updated` carry the whole configuration (snake_case keys
below; never the secret), so any consumer can keep its own copy by upserting it.
`delivery.requested` carries the `target`: the part the dispatcher needs to send.
"""

from __future__ import annotations

from typing import Any

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
)

TARGET_FIELDS: tuple[str, ...] = (
    "url",
    "instruction",
    "timeout_seconds",
    "pass_api_key",
    "read_patterns",
    "write_patterns",
    "max_depth",
    "max_retries",
    "concurrency_policy",
)

# What changing makes the scheduler recompute the next slot.
SCHEDULE_FIELDS: frozenset[str] = frozenset({"cron_schedule", "timezone", "enabled"})


def target_of(config: dict[str, Any]) -> dict[str, Any]:
    return {key: config.get(key) for key in TARGET_FIELDS}
