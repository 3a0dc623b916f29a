"""Which run started which (CONTRACT §16.3): a delivery's trace and parent, the W3C
`traceparent` header, and who wrote a note version. Pure.

A delivery is named `"{kind}:{id}"`. A root — a cron slot, a manual trigger, a replay, a
change delivery fired by an admin's or an API key's write — is its own trace and has no
parent. A change delivery fired by a batch some delivery X wrote (through X's api_token,
or X's synchronous answer) has parent X and X's trace. Requests of roots leave `trace`
out of their event (it is their own name), so the events of every root stay as they were.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cronhooks_common.events import UNSET, Kind, RequestFields, UnsetType


def delivery_ref(kind: str, delivery_id: int) -> str:
    """A delivery's name in traces, parents and `Note.writtenBy`: `cron:42`, `change:43`."""
    return f"{kind}:{delivery_id}"


def trace_of(request: RequestFields) -> str:
    """The trace a request belongs to: the one it carries, else its own (a root)."""
    if isinstance(request.trace, str):
        return request.trace
    return delivery_ref(request.kind, request.delivery_id)


def _hex(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def traceparent(trace: str, ref: str) -> str:
    """The W3C `traceparent` of the request of delivery `ref` in `trace`: trace id the
    first 32 hex digits of SHA-256 of the trace, span id the first 16 of the delivery's
    name, sampled. Derived, not random, so every attempt (and a receiver) computes the same."""
    return f"00-{_hex(trace, 32)}-{_hex(ref, 16)}-01"


@dataclass(frozen=True, slots=True)
class Origin:
    """Who wrote a note batch: `written_by` as `Note.writtenBy` shows it (`cron:{id}`,
    `change:{id}`, `api_key:{name}`, `admin:{name}`), and when a delivery wrote it, that
    delivery's trace (the change deliveries the batch fires continue it)."""

    written_by: str
    trace: str | None = None

    @classmethod
    def delivery(cls, kind: Kind | str, delivery_id: int, trace: str | None) -> Origin:
        """A delivery's write; `trace` None: the delivery is a root (its own trace)."""
        ref = delivery_ref(kind, delivery_id)
        return cls(ref, trace or ref)

    @property
    def parent(self) -> str | UnsetType:
        """The parent of the deliveries this batch fires: the writing delivery, if any."""
        return self.written_by if self.trace is not None else UNSET

    @property
    def chain(self) -> str | UnsetType:
        """The trace of the deliveries this batch fires, if it continues one."""
        return self.trace if self.trace is not None else UNSET
