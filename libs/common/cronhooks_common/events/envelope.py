"""The event envelope (CONTRACT §6): what every event carries around its typed data.

Event names are past tense and double as RabbitMQ routing keys. Stream names say whose
history an event belongs to: ``webhook-7``, ``delivery-42``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NotRequired, TypedDict
from uuid import UUID, uuid4

from cronhooks_common import jsonfast
from cronhooks_common.clock import iso
from cronhooks_common.events.base import Payload, decode
from cronhooks_common.events.delivery import DeliveryFieldsData
from cronhooks_common.events.names import CRON

SCHEMA_VERSION = 1


def storable(text: str) -> str:
    """Text that Postgres can keep in an event (jsonb refuses NUL and lone surrogates):
    such characters become U+FFFD. For text we only record (response bodies, errors)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode()
    return text


def storable_json(value: Any) -> bool:
    """True if `value` can be stored in an event unchanged: no string in it (key or value)
    holds what `storable` would replace. Walked, not searched in its JSON text, where a
    literal backslash-u-0000 written by a user looks like an escaped NUL."""
    if isinstance(value, str):
        return storable(value) == value
    if isinstance(value, dict):
        return all(storable_json(k) and storable_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(storable_json(v) for v in value)
    return True


def storable_text(raw: bytes) -> bool:
    """True when whatever JSON `raw` parses to is `storable_json` for certain, found in C
    without walking it: no `\\u` escape (the only way JSON writes a NUL, one way to
    write a lone surrogate), no 0xED byte (a surrogate's UTF-8 lead, which Python's
    parser lets through; Hangul's too, which only costs the walk) and no zero byte
    (UTF-16 and UTF-32 texts, whose escapes this search would miss). False says nothing:
    walk the parsed value."""
    return b"\\u" not in raw and b"\xed" not in raw and b"\x00" not in raw


def delivery_fields(data: Mapping[str, Any]) -> DeliveryFieldsData:
    """The fields every `delivery.*` event carries (CONTRACT §6), from a request's or an
    earlier delivery event's data (as stored, read by key: not decoded)."""
    return {
        "delivery_id": data["delivery_id"],
        "webhook_id": data["webhook_id"],
        "kind": data.get("kind", CRON),
        "attempt": data["attempt"],
        "scheduled_for": data.get("scheduled_for"),
        "trigger": data["trigger"],
        "missed_count": data.get("missed_count", 0),
    }


class EventJSON(TypedDict):
    """An event as the bus carries it (CONTRACT §6), keys in the order written. Messages
    written before `causation_id`, `actor` and `schema_version` existed lack them."""

    event_id: str
    type: str
    stream: str
    version: int
    occurred_at: str
    correlation_id: str
    causation_id: NotRequired[str | None]
    actor: NotRequired[str | None]
    schema_version: NotRequired[int]
    data: dict[str, Any]  # the type's data as stored: decoded by `Event.payload`


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended; the store gives it a version and an envelope."""

    type: str
    data: dict[str, Any]
    event_id: UUID = field(default_factory=uuid4)

    @classmethod
    def of(cls, payload: Payload) -> NewEvent:
        """The event of a typed payload."""
        return cls(payload.TYPE, payload.to_data())


@dataclass(frozen=True, slots=True)
class Event:
    """A recorded event: the envelope every consumer receives."""

    event_id: UUID
    type: str
    stream: str
    version: int
    occurred_at: datetime
    data: dict[str, Any]
    correlation_id: UUID
    causation_id: UUID | None = None
    actor: str | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def payload(self) -> Payload:
        """The typed data (upcast to its class's schema version). Raises ValueError if the
        data does not fit its type, KeyError for a type cronhooks does not define."""
        return decode(self.type, self.data, self.schema_version)

    def to_json(self) -> EventJSON:
        return {
            "event_id": str(self.event_id),
            "type": self.type,
            "stream": self.stream,
            "version": self.version,
            "occurred_at": iso(self.occurred_at),
            "correlation_id": str(self.correlation_id),
            "causation_id": None if self.causation_id is None else str(self.causation_id),
            "actor": self.actor,
            "schema_version": self.schema_version,
            "data": self.data,
        }

    def to_bytes(self) -> bytes:
        return jsonfast.dumps_bytes(self.to_json())

    @classmethod
    def from_json(cls, body: EventJSON) -> Event:
        causation = body.get("causation_id")
        return cls(
            event_id=UUID(body["event_id"]),
            type=body["type"],
            stream=body["stream"],
            version=int(body["version"]),
            occurred_at=datetime.fromisoformat(body["occurred_at"]),
            data=body["data"],
            correlation_id=UUID(body["correlation_id"]),
            causation_id=None if causation is None else UUID(causation),
            actor=body.get("actor"),
            schema_version=int(body.get("schema_version", SCHEMA_VERSION)),
        )

    @classmethod
    def from_bytes(cls, raw: bytes) -> Event:
        return cls.from_json(jsonfast.loads(raw))


@dataclass(frozen=True, slots=True)
class Causation:
    """Who and what caused the events being appended: carried into their envelopes."""

    correlation_id: UUID
    causation_id: UUID | None = None
    actor: str | None = None

    @classmethod
    def new(cls, actor: str | None = None) -> Causation:
        """A fresh chain, started by a command (an admin request, a timer, an agent call)."""
        return cls(correlation_id=uuid4(), actor=actor)

    @classmethod
    def following(cls, event: Event, actor: str | None = None) -> Causation:
        """Events caused by handling `event` continue its correlation chain."""
        return cls(event.correlation_id, event.event_id, actor or event.actor)
