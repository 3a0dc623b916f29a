"""destination.* events: destination limits (CONTRACT §17), one stream per destination
(names.destination_stream). The limits' state is `shared.destination_limits`
(cronhooks_common.destination_state), written in the transaction of each of these events."""

from __future__ import annotations

from typing import ClassVar

from cronhooks_common.events.base import Payload


class DestinationLimitSet(Payload, frozen=True, kw_only=True):
    """setDestinationLimit: a destination's override set, or removed (both limits None)."""

    TYPE: ClassVar[str] = "destination.limit_set"
    destination: str  # scheme://host:port
    max_concurrent: int | None  # None: CRONHOOKS_DESTINATION_CONCURRENCY
    max_per_second: float | None  # None: unlimited
    by: str  # the admin's actor
