"""What an agent sends about its run (CONTRACT §16.2), judged: the report's body
`{"status": "ok"|"error", "message", "costs", "logs"}`, a heartbeat's `{"logs"}`, the
digest that recognises the same report again, and where a heartbeat moves the deadline.
Pure: runs.py writes what these decide."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from cronhooks_common.events import MAX_RUN_SECONDS, RunState, storable

MAX_MESSAGE = 4000  # characters of a report's message kept (the rest is cut, marked …)
STATES: dict[str, RunState] = {"ok": "SUCCEEDED", "error": "FAILED"}


class BadReport(ValueError):
    """A body that is no report: 400, naming the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field


@dataclass(frozen=True, slots=True)
class Report:
    status: Literal["ok", "error"]
    message: str | None
    costs: object  # as sent: run_logs judges them (None: absent)
    logs: object
    digest: str  # of the canonical report: the same report again has the same

    @property
    def state(self) -> RunState:
        return STATES[self.status]


def report_of(body: Any) -> Report:
    """The report in a parsed body; BadReport naming the field that is wrong."""
    if not isinstance(body, dict):
        raise BadReport("body", 'must be an object {"status": "ok"|"error", ...}')
    status = body.get("status")
    if status not in STATES:
        raise BadReport("status", 'must be "ok" or "error"')
    message = body.get("message")
    if message is not None and not isinstance(message, str):
        raise BadReport("message", "must be a string")
    if message is not None:
        message = storable(message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "…")
    costs, logs = body.get("costs"), body.get("logs")
    return Report(status, message, costs, logs, digest(status, body.get("message"), costs, logs))


def digest(status: str, message: object, costs: object, logs: object) -> str:
    """SHA-256 of the report as canonical JSON (sorted keys, compact; what was sent, before
    anything is cut): two reports are the same when their contents are, whatever their
    key order or spacing."""
    canonical = json.dumps(
        {"status": status, "message": message, "costs": costs, "logs": logs},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,  # lone surrogates too: escaped, never an encoding error
        allow_nan=True,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def heartbeat_logs(body: Any) -> object:
    """The logs of a heartbeat's body (optional; None: none); BadReport when the body is
    not an object."""
    if body is None:
        return None
    if not isinstance(body, dict):
        raise BadReport("body", 'must be an object {"logs": [...]}')
    return body.get("logs")


def moved_deadline(now: datetime, started_at: datetime, timeout_seconds: int) -> datetime:
    """Where a heartbeat at `now` moves a run's deadline: now + runTimeoutSeconds, never
    past started_at + 24 h."""
    cap = started_at + timedelta(seconds=MAX_RUN_SECONDS)
    return min(now + timedelta(seconds=timeout_seconds), cap)
