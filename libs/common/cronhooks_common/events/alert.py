"""alert.* events: one alert per failing spell of a webhook, on its own stream
`alert-{id}` (CONTRACT §12): raised, raised again when auto-disabled, then resolved.
A chain alert (§11) is raised once for a chain that reached CRONHOOKS_MAX_CHAIN_DELIVERIES,
for the webhook whose delivery was the first skipped; it carries `trace`."""

from __future__ import annotations

from typing import ClassVar, Literal

from cronhooks_common.events.base import UNSET, Kind, Payload, UnsetType


class AlertFields(Payload, frozen=True, kw_only=True):
    alert_id: int
    webhook_id: int
    kind: Kind
    url: str
    description: str
    consecutive_failures: int
    last_error: str | None
    disabled: bool  # the webhook is auto-disabled
    trace: str | UnsetType = UNSET  # a chain alert: the trace that reached the limit


class AlertRaised(AlertFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "alert.raised"


class AlertResolved(AlertFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "alert.resolved"
    reason: Literal["recovered", "re_enabled", "deleted"]
