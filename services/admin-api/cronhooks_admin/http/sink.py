"""The recording sink behind `/debug/test_webhook` (CONTRACT §12): what a call asks for
(`status`, `delay`) and the bounded log of calls it received. Pure: no I/O, no clock.

The log lives in the memory of one admin-api process, as trip2g's does: a debug aid for a
single local instance, not a record. It is bounded twice (calls and body bytes), so a
sender in a loop cannot grow it without end; the oldest calls go first.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any, TypedDict

from cronhooks_admin.errors import InputError
from cronhooks_common import jsonfast
from cronhooks_common.events import storable
from cronhooks_common.json_input import MAX_NESTING, nesting

MAX_DELAY_SECONDS = 60.0
MAX_KEPT_CALLS = 1000
MAX_KEPT_BYTES = 64 << 20  # bodies of the kept calls, in all

# A duration as Go writes it (trip2g's `delay=2s`): one or more number+unit parts.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION = re.compile(rf"(?:{_PART.pattern})+")


def _whole_number(text: str, most_digits: int) -> int | None:
    """`text` as a whole number if it is ASCII digits, at most `most_digits` of them
    significant; else None. `int()` raises ValueError past 4,300 digits (leading zeros
    count), so a parameter of thousands of digits is refused before it gets there."""
    if not text.isascii() or not text.isdigit():
        return None
    significant = text.lstrip("0") or "0"
    return int(significant) if len(significant) <= most_digits else None


def parse_status(text: str | None) -> int:
    """The status to answer with; 200 when not given."""
    if text is None:
        return 200
    status = _whole_number(text, 3)
    if status is None or not 200 <= status <= 599:
        raise InputError("status", "must be an HTTP status code from 200 to 599")
    return status


def parse_delay(text: str | None) -> float:
    """Seconds to wait before answering: a duration such as `250ms`, `2s` or `1m30s`
    (`0` alone is also zero), at most MAX_DELAY_SECONDS; 0 when not given."""
    if text is None or text == "0":
        return 0.0
    if not _DURATION.fullmatch(text):
        raise InputError("delay", "must be a duration such as 250ms, 2s or 1m30s")
    seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
    if seconds > MAX_DELAY_SECONDS:
        raise InputError("delay", f"must be at most {MAX_DELAY_SECONDS:g}s")
    return seconds


def parse_last(text: str | None) -> int | None:
    """How many of the latest calls to list; None (all) when not given."""
    if text is None:
        return None
    last = _whole_number(text, 19)
    if last is None or last < 1:
        raise InputError("last", "must be a positive integer")
    return last


def parse_id(text: str | None) -> int:
    """The id of the cron webhook to trigger: required, a positive 64-bit integer."""
    webhook_id = None if text is None else _whole_number(text, 19)
    if webhook_id is None or not 1 <= webhook_id < 2**63:
        raise InputError("id", "must be the id of a cron webhook (a positive integer)")
    return webhook_id


def body_value(raw: bytes) -> Any:
    """A body as the call list shows it: the JSON value when it is JSON (so `body.id`
    reads as with trip2g) nested at most MAX_NESTING levels, else its text: the list is
    written as JSON, and a value of a thousand levels is more than its writer recurses."""
    try:
        value = jsonfast.loads(raw)
    except ValueError:
        return _text(raw)
    return value if nesting(value) <= MAX_NESTING else _text(raw)


def _text(raw: bytes) -> str:
    return storable(raw.decode("utf-8", "replace"))


class CallJSON(TypedDict):
    """A call as the call list shows it."""

    received_at: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: object  # body_value: its JSON value, or its text


@dataclass(frozen=True, slots=True)
class Call:
    received_at: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    raw: bytes

    def to_json(self) -> CallJSON:
        return {
            "received_at": self.received_at,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": body_value(self.raw),
        }


def text_map(pairs: Any) -> dict[str, str]:
    """Header or query pairs as one JSON object: a repeated name's values joined by ", "
    (as HTTP folds them), text cleaned of what JSON cannot carry."""
    out: dict[str, str] = {}
    for name, value in pairs:
        key = storable(name)
        out[key] = f"{out[key]}, {storable(value)}" if key in out else storable(value)
    return out


class CallLog:
    """The kept calls, oldest first, within `max_calls` and `max_bytes` of bodies."""

    def __init__(self, max_calls: int = MAX_KEPT_CALLS, max_bytes: int = MAX_KEPT_BYTES) -> None:
        self._calls: deque[Call] = deque()
        self._bytes = 0
        self.max_calls = max_calls
        self.max_bytes = max_bytes

    def record(self, call: Call) -> None:
        self._calls.append(call)
        self._bytes += len(call.raw)
        while len(self._calls) > self.max_calls or self._bytes > self.max_bytes:
            self._bytes -= len(self._calls.popleft().raw)

    def latest(self, last: int | None = None) -> list[Call]:
        calls = list(self._calls)
        return calls if last is None else calls[-last:]

    def clear(self) -> int:
        cleared = len(self._calls)
        self._calls.clear()
        self._bytes = 0
        return cleared
