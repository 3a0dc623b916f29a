"""The synchronous answer to a cron-webhook delivery (CONTRACT §4)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict


def content_hash(content: str) -> str:
    """What cronhooks stores as a note's contentHash (and expects as `expected_hash`)."""
    return hashlib.sha256(content.encode()).hexdigest()


class ChangeJSON(TypedDict):
    """A change as the answer carries it (CONTRACT §4)."""

    path: str
    content: str
    expected_hash: NotRequired[str]  # absent: overwrite


class SyncAnswerJSON(TypedDict):
    """The answer's body (CONTRACT §4)."""

    status: Literal["ok", "partial", "error"]
    message: str
    changes: NotRequired[list[ChangeJSON]]  # absent: none


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


@dataclass
class SyncAnswer:
    status: Literal["ok", "partial", "error"] = "ok"
    message: str = ""
    changes: list[Change] = field(default_factory=list)

    def create(self, path: str, content: str) -> SyncAnswer:
        self.changes.append(Change(path, content, ""))
        return self

    def update(self, path: str, content: str, *, previous_content: str) -> SyncAnswer:
        self.changes.append(Change(path, content, content_hash(previous_content)))
        return self

    def to_json(self) -> SyncAnswerJSON:
        out: SyncAnswerJSON = {"status": self.status, "message": self.message}
        if self.changes:
            out["changes"] = [c.to_json() for c in self.changes]
        return out
