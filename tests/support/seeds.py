"""Rows written straight into a service's tables, for tests that need many of them fast."""

from __future__ import annotations

from typing import Any


def scheduler_config(**over: Any) -> dict[str, Any]:
    """A webhook's config as the scheduler keeps it (scheduler.webhooks.config): every
    minute, UTC, no retries; `over` replaces or adds fields."""
    return {
        "cron_schedule": "* * * * *",
        "timezone": "UTC",
        "enabled": True,
        "misfire_grace_seconds": 60,
        "url": "http://agent/",
        "instruction": "",
        "timeout_seconds": 5,
        "pass_api_key": False,
        "read_patterns": ["*"],
        "write_patterns": [],
        "max_depth": 1,
        "max_retries": 0,
        **over,
    }
