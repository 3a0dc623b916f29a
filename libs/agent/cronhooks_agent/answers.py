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


class PatchJSON(TypedDict):
    """A patch as the answer carries it (CONTRACT §16.1): `find` replaced once by `replace`."""

    kind: Literal["patch"]
    path: str
    find: str
    replace: str
    expected_hash: NotRequired[str]  # absent: patch whatever the note's version


class SyncAnswerJSON(TypedDict):
    """The answer's body (CONTRACT §4)."""

    status: Literal["ok", "partial", "error"]
    message: str
    changes: NotRequired[list[ChangeJSON | PatchJSON]]  # absent: none


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
        return out
