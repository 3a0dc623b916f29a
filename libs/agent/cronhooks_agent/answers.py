"""The synchronous answer to a cron-webhook delivery (CONTRACT §4), with what the run cost
and logged (§16.1)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NotRequired, TypedDict


def content_hash(content: str) -> str:
    """What cronhooks stores as a note's contentHash (and expects as `expected_hash`)."""
    return hashlib.sha256(content.encode()).hexdigest()


class ChangeJSON(TypedDict):
    """A change as the answer carries it (CONTRACT §4)."""

    path: str
    content: str
    expected_hash: NotRequired[str]  # absent: overwrite


class PatchJSON(TypedDict):
    """A patch as the answer carries it (CONTRACT §16.1): `find` replaced once by `replace`."""

    kind: Literal["patch"]
    path: str
    find: str
    replace: str
    expected_hash: NotRequired[str]  # absent: patch whatever the note's version


class LogJSON(TypedDict):
    """One log entry as the answer carries it (CONTRACT §16.1)."""

    level: str
    msg: str
    ts: NotRequired[str]  # RFC 3339
    data: NotRequired[object]  # any JSON


class SyncAnswerJSON(TypedDict):
    """The answer's body (CONTRACT §4, §16.1)."""

    status: Literal["ok", "partial", "error"]
    message: str
    changes: NotRequired[list[ChangeJSON | PatchJSON]]  # absent: none
    costs: NotRequired[dict[str, float]]  # {unit: amount}, at most 32 units
    logs: NotRequired[list[LogJSON]]  # at most 500 entries, 64 KiB


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    content: str
    # "" creates (the note must not exist); a hash updates that version; None overwrites.
    expected_hash: str | None = ""

    def to_json(self) -> ChangeJSON:
        out: ChangeJSON = {"path": self.path, "content": self.content}
        if self.expected_hash is not None:
            out["expected_hash"] = self.expected_hash
        return out


@dataclass(frozen=True, slots=True)
class Patch:
    """Replace the one occurrence of `find` in the note by `replace` (CONTRACT §16.1): the
    note must exist and hold `find` exactly once, else the whole answer is rejected."""

    path: str
    find: str
    replace: str = ""
    expected_hash: str | None = None  # a hash: only if the note is still that version

    def to_json(self) -> PatchJSON:
        if not self.find:
            raise ValueError("find is required for a patch")
        out: PatchJSON = {
            "kind": "patch",
            "path": self.path,
            "find": self.find,
            "replace": self.replace,
        }
        if self.expected_hash is not None:
            out["expected_hash"] = self.expected_hash
        return out


@dataclass
class SyncAnswer:
    status: Literal["ok", "partial", "error"] = "ok"
    message: str = ""
    changes: list[Change | Patch] = field(default_factory=list)
    # What the run cost and logged (CONTRACT §16.1), recorded with the attempt whatever
    # its outcome: units of 1-64 characters of [A-Za-z0-9_.:-], amounts >= 0.
    costs: dict[str, float] = field(default_factory=dict)
    logs: list[LogJSON] = field(default_factory=list)

    def cost(self, unit: str, amount: float) -> SyncAnswer:
        """Add `amount` of `unit` (summed with what was added before)."""
        self.costs[unit] = self.costs.get(unit, 0) + amount
        return self

    def log(
        self, level: str, msg: str, *, data: object = None, ts: datetime | None = None
    ) -> SyncAnswer:
        """Append a log entry; `ts` (aware) is sent as RFC 3339, `data` as given."""
        entry: LogJSON = {"level": level, "msg": msg}
        if ts is not None:
            entry["ts"] = ts.isoformat()
        if data is not None:
            entry["data"] = data
        self.logs.append(entry)
        return self

    def create(self, path: str, content: str) -> SyncAnswer:
        self.changes.append(Change(path, content, ""))
        return self

    def update(self, path: str, content: str, *, previous_content: str) -> SyncAnswer:
        self.changes.append(Change(path, content, content_hash(previous_content)))
        return self

    def patch(
        self, path: str, find: str, replace: str = "", *, expected_hash: str | None = None
    ) -> SyncAnswer:
        """Replace `find` (exactly once in the note) by `replace`: a small edit without
        sending the whole note back."""
        self.changes.append(Patch(path, find, replace, expected_hash))
        return self

    def to_json(self) -> SyncAnswerJSON:
        out: SyncAnswerJSON = {"status": self.status, "message": self.message}
        if self.changes:
            out["changes"] = [c.to_json() for c in self.changes]
        if self.costs:
            out["costs"] = dict(self.costs)
        if self.logs:
            out["logs"] = list(self.logs)
        return out
