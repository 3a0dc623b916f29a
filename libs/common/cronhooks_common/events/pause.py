"""deliveries.* events: the pause switch (CONTRACT §16.4), on the one stream
`deliveries-pause` (names.PAUSE_STREAM). The switch's state is `shared.delivery_pause`
(cronhooks_common.pause), written in the transaction of each of these events."""

from __future__ import annotations

from typing import ClassVar

from cronhooks_common.events.base import Payload, Timestamp


class DeliveriesPaused(Payload, frozen=True, kw_only=True):
    """Deliveries were paused, or a pause's `until` and `reason` replaced (`since` then
    stays the first pause's)."""

    TYPE: ClassVar[str] = "deliveries.paused"
    since: Timestamp
    until: Timestamp | None  # None: until resumeDeliveries
    reason: str
    by: str  # the admin's actor
    replaced: bool  # True: it was paused already, `until` and `reason` replaced


class DeliveriesResumed(Payload, frozen=True, kw_only=True):
    """A pause ended: by resumeDeliveries, or by itself when its `until` came."""

    TYPE: ClassVar[str] = "deliveries.resumed"
    since: Timestamp  # when the pause that ended began
    resumed_at: Timestamp  # an automatic resume: the pause's `until`
    automatic: bool
    by: str | None  # the admin's actor; None when automatic
