"""The event store is the truth, the broker only carries news (CONTRACT §15).

A consumer acts on an event as the event store holds it, looked up by `event_id`: a message
that is not in the store, or whose type, stream, version or data differ from the stored
event, is dropped — logged and counted — and never acted on. So whoever can publish to the
broker cannot make cronhooks sign, send or write anything.
"""

from __future__ import annotations

from uuid import UUID

import structlog
from prometheus_client import Counter

from cronhooks_common.events import Event

log = structlog.get_logger(__name__)

DROPPED = Counter(
    "cronhooks_events_dropped_total",
    "Messages not acted on: not in the event store, or not as the store holds them",
    ["consumer", "reason"],
)


def as_stored(sent: Event, stored: Event | None, *, consumer: str) -> Event | None:
    """The stored event to act on, or None (logged and counted) if the message is forged."""
    if stored is None:
        reason = "not_in_store"
    elif (stored.type, stored.stream, stored.version, stored.data) != (
        sent.type,
        sent.stream,
        sent.version,
        sent.data,
    ):
        reason = "altered"
    else:
        return stored
    DROPPED.labels(consumer, reason).inc()
    log.warning(
        "event_dropped",
        consumer=consumer,
        reason=reason,
        event_id=str(sent.event_id),
        event_type=sent.type,
        stream=sent.stream,
    )
    return None


def as_noticed(
    ref_event_id: UUID, stored: Event | None, *, types: frozenset[str], consumer: str
) -> Event | None:
    """The stored event a work notice names (work.py), or None (logged and counted) if the
    store does not hold it or it is not of a type notices bring to `consumer`."""
    if stored is not None and stored.type in types:
        return stored
    reason = "not_in_store" if stored is None else "not_noticed"
    DROPPED.labels(consumer, reason).inc()
    log.warning("event_dropped", consumer=consumer, reason=reason, event_id=str(ref_event_id))
    return None
