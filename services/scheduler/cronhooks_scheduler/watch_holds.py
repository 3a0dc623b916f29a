"""Destination holds, as the watchdog sees them (CONTRACT §17): a delivery whose
destination a `Retry-After` holds waits in a dispatcher, without an event, until the hold
ends. It must not fail for that wait, so the watchdog gives it its timeout and GRACE again
from the hold's end instead of abandoning it (watchdog.py). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from cronhooks_common.destination_key import destination_of
from cronhooks_common.events import Event


def held_until(history: list[Event], holds: Mapping[str, datetime]) -> datetime | None:
    """When the hold on the destination of the delivery's latest request ends; None when
    it is not held (or names no target)."""
    if not holds:
        return None
    for event in reversed(history):
        target = event.data.get("target")
        if isinstance(target, dict) and isinstance(target.get("url"), str):
            return holds.get(destination_of(target["url"]))
    return None
