"""The base of every event's data: a frozen msgspec Struct, registered by its type.

Each event type is one class (delivery.py, webhook.py, ...) whose fields are exactly the
keys of its `data` on the wire (CONTRACT §6, docs/asyncapi.yaml): a field that some
events of the type lack is `UNSET` and left out of the JSON; one that is always written
has no such default. The classes decode what the store and the bus hold
(`payload_of`) and encode what producers append (`NewEvent.of`): msgspec, because it
builds, encodes and decodes these several times faster than dataclasses
(`bench/events_codec.py`), and checks types on the way in.

Schema changes: a field added later gets the default older events imply (decoding
fills it, no version bump; where the default depends on other fields, a pure `filler`
registered next to the class completes such data); anything else (a rename, a new
meaning) bumps the class's `SCHEMA_VERSION` and registers a pure upcaster from the
version before, next to the class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "UNSET",
    "Kind",
    "Payload",
    "Timestamp",
    "Trigger",
    "UnsetType",
    "Upcaster",
    "decode",
    "filler",
    "payload_class",
    "registered_types",
    "upcaster",
]

# ISO 8601 text with an offset, exactly as written (clock.iso): kept as text so that what
# a consumer re-sends is byte for byte what was stored.
Timestamp = str
Kind = Literal["cron", "change"]
Trigger = Literal["schedule", "manual", "retry", "change"]

# data of version n -> data of version n + 1, for one event type. Pure.
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_CLASSES: dict[str, type[Payload]] = {}
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}
_FILLERS: dict[str, Upcaster] = {}


class Payload(msgspec.Struct, frozen=True, kw_only=True):
    """The data of one event type. Subclasses set `TYPE` (the routing key) and register
    themselves; intermediate classes (shared field sets) leave it empty."""

    TYPE: ClassVar[str] = ""
    SCHEMA_VERSION: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("TYPE"):
            if cls.TYPE in _CLASSES:
                raise TypeError(f"event type {cls.TYPE} is registered twice")
            _CLASSES[cls.TYPE] = cls

    def to_data(self) -> dict[str, Any]:
        """The event's `data` as stored and published."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data


P = TypeVar("P", bound=Payload)


def payload_class(event_type: str) -> type[Payload]:
    """The class of an event type; KeyError for a type cronhooks does not define."""
    return _CLASSES[event_type]


def registered_types() -> dict[str, type[Payload]]:
    return dict(_CLASSES)


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register `fn` as the step from `from_version` to `from_version + 1` of a type."""

    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(event_type, from_version)] = fn
        return fn

    return register


def filler(event_type: str) -> Callable[[Upcaster], Upcaster]:
    """Register `fn` to complete data of a type written before some of its fields existed
    (same schema version); it returns data that already has them unchanged."""

    def register(fn: Upcaster) -> Upcaster:
        _FILLERS[event_type] = fn
        return fn

    return register


def decode(event_type: str, data: dict[str, Any], schema_version: int = 1) -> Payload:
    """The typed data of a stored or published event, upcast to its class's version.
    Raises msgspec.ValidationError (a subclass of ValueError) if it does not fit."""
    cls = _CLASSES[event_type]
    version = schema_version
    while version < cls.SCHEMA_VERSION:
        data = _UPCASTERS[(event_type, version)](data)
        version += 1
    fill = _FILLERS.get(event_type)
    if fill is not None:
        data = fill(data)
    return msgspec.convert(data, cls)
