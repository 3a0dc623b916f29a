"""The rules a batch of note changes must pass (CONTRACT §5, §15). Pure.

Every change is checked and every violation reported (one error per offending change);
the caller writes nothing unless the whole batch passes. A batch holds writes (content)
and removals (`content` None: the note is hidden).

Every way into the store — a push, a staged push, a commit of what was staged, a removal,
an agent's answer — passes the same batch rules (`Batch`): each path at most once, each
note at most 1 MiB, the writer's write patterns as they are now, and at most 1,000 changes
and 2 MiB of content in all (the most one push can carry).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cronhooks_common.events import ChangeRefused, storable
from cronhooks_common.globs import matches_any
from cronhooks_common.paths import MAX_PATH_BYTES, path_problem

__all__ = ["MAX_PATH_BYTES", "path_problem"]

MAX_NOTE_BYTES = 1 << 20  # 1 MiB per note
MAX_BATCH_CHANGES = 1000
# 2 MiB of content: the most a push can carry (its body is at most 2 MiB), and so the
# most a commit of staged pushes may apply at once.
MAX_BATCH_BYTES = 2 << 20
TOO_MANY_CHANGES = f"at most {MAX_BATCH_CHANGES:,} changes in a batch"
TOO_MANY_BYTES = f"at most {MAX_BATCH_BYTES >> 20} MiB of content in a batch"
TWICE = "path appears twice in the batch"
_HEX_HASH = re.compile(r"^[0-9a-f]{64}$")
_BASE64URL_HASH = re.compile(r"^[A-Za-z0-9_-]{43}=?$")


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # normalised (NFC)
    content: str | None  # None: remove (hide) the note
    expected_hash: str | None  # None: no check; "": must not exist; else the current hash (hex)

    @property
    def removes(self) -> bool:
        return self.content is None


INVALID, TOO_LARGE, FORBIDDEN, CONFLICT, MISSING = (
    "invalid",
    "too_large",
    "forbidden",
    "conflict",
    "missing",
)


_FIELDS = ("path", "content", "expected_hash", "changes", "paths", "depth")


@dataclass(frozen=True, slots=True)
class ChangeError:
    path: str
    error: str
    kind: str = INVALID  # invalid | too_large | forbidden | conflict | missing

    @property
    def field(self) -> str:
        """The input field the error is about, for the logs: every reason starts with its
        name (`path …`, `content …`, `expected_hash …`) or is about the batch or a note."""
        first = self.error.split(" ", 1)[0]
        if first in _FIELDS:
            return first
        return "path" if self.path and not self.path.startswith("#") else "changes"

    @property
    def refused(self) -> ChangeRefused:
        # The offending path as sent may hold what an event cannot (NUL, a lone surrogate):
        # shown with U+FFFD in its place, in the answer and in the notes.rejected event.
        return ChangeRefused(path=storable(self.path), error=storable(self.error))

    def to_json(self) -> dict[str, str]:
        """As the agent API answers it: as the notes.rejected event holds it."""
        refused = self.refused
        return {"path": refused.path, "error": refused.error}


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def normalize_hash(value: str) -> str | None:
    """An `expected_hash` as lowercase hex, or None if it names no SHA-256 digest.

    Accepted: lowercase hex (as `contentHash` is shown) or base64url, padded or not
    (trip2g's `base64.URLEncoding` of the digest): both name the same 32 bytes."""
    if _HEX_HASH.match(value):
        return value
    if _BASE64URL_HASH.match(value):
        try:
            digest = base64.urlsafe_b64decode(value.rstrip("=") + "=")
        except (binascii.Error, ValueError):
            return None
        return digest.hex() if len(digest) == 32 else None
    return None


HASH_RULE = "expected_hash must be empty, 64 lowercase hex characters or base64url of SHA-256"


def parse_expected(expected: Any) -> tuple[str | None, str | None]:
    """(normalised expected hash, problem): None stays None (no check), "" stays ""."""
    if expected is None:
        return None, None
    if not isinstance(expected, str):
        return None, "expected_hash must be a string"
    if expected == "":
        return "", None
    normalised = normalize_hash(expected)
    return (normalised, None) if normalised is not None else (None, HASH_RULE)


MayWrite = Callable[[str], bool]


def allowed_by(patterns: Sequence[str]) -> MayWrite:
    """The write check of one set of patterns (a path must match one of them)."""
    frozen = tuple(patterns)
    return lambda path: matches_any(path, frozen)


def batch_limits(count: int, size: int) -> list[ChangeError]:
    """The bounds of every batch: `count` changes holding `size` bytes of content."""
    errors = []
    if count > MAX_BATCH_CHANGES:
        errors.append(ChangeError("", f"{TOO_MANY_CHANGES}, not {count:,}", TOO_LARGE))
    if size > MAX_BATCH_BYTES:
        errors.append(ChangeError("", f"{TOO_MANY_BYTES}, not {size:,} bytes", TOO_LARGE))
    return errors


class Batch:
    """The rules over a whole batch, fed one change at a time (in the batch's order):
    a path at most once (its second and later changes are the ones refused), a note at
    most 1 MiB, inside the writer's patterns; then `batch_limits` over them all."""

    def __init__(self, may_write: MayWrite) -> None:
        self._may_write = may_write
        self._seen: set[str] = set()
        self._count = 0
        self._size = 0

    def admit(
        self, path: str, content: str | None, problem: str | None = None
    ) -> ChangeError | None:
        """What is wrong with one more change, if anything: its own `problem` as parsed
        (path, content, expected_hash) first, then the batch's rules."""
        twice = path in self._seen
        self._seen.add(path)
        self._count += 1
        if problem is not None:
            return ChangeError(path, problem)
        if twice:
            return ChangeError(path, TWICE)
        size = len(content.encode()) if content is not None else 0
        self._size += size
        if size > MAX_NOTE_BYTES:
            return ChangeError(path, f"content is larger than {MAX_NOTE_BYTES} bytes", TOO_LARGE)
        if not self._may_write(path):
            return ChangeError(path, "path is outside the write patterns", FORBIDDEN)
        return None

    def close(self, errors: list[ChangeError]) -> list[ChangeError]:
        """The batch's errors: beyond a bound, the bound alone (the batch is refused whole)."""
        return batch_limits(self._count, self._size) or errors


def check_batch(changes: Sequence[Change], *, may_write: MayWrite) -> list[ChangeError]:
    """The batch rules over changes already parsed (`commitNotes`: what was staged, checked
    again as the batch it now is, under the writer's patterns as they are now)."""
    batch = Batch(may_write)
    errors = [e for c in changes if (e := batch.admit(c.path, c.content)) is not None]
    return batch.close(errors)


def _too_many(raw: list[Any]) -> list[ChangeError]:
    # Counted before anything is parsed: a huge batch costs no more than its length.
    return batch_limits(len(raw), 0)


def parse_changes(raw: Any, *, may_write: MayWrite) -> tuple[list[Change], list[ChangeError]]:
    """Validate a batch of writes as received (JSON); return the changes and every error.
    `may_write` says which paths the writer may write (its patterns)."""
    if not isinstance(raw, list):
        return [], [ChangeError("", "changes must be an array")]
    if too_many := _too_many(raw):
        return [], too_many
    batch = Batch(may_write)
    changes: list[Change] = []
    errors: list[ChangeError] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            errors.append(ChangeError(f"#{index}", "a change must be an object"))
            continue
        path, content = item.get("path"), item.get("content")
        if not isinstance(path, str):
            errors.append(ChangeError(f"#{index}", "path must be a string"))
            continue
        path = unicodedata.normalize("NFC", path) if _is_utf8(path) else path
        expected, problem = parse_expected(item.get("expected_hash"))
        problem = path_problem(path) or _content_problem(content) or problem
        error = batch.admit(path, content if problem is None else None, problem)
        if error is not None:
            errors.append(error)
            continue
        assert isinstance(content, str)
        changes.append(Change(path, content, expected))
    return changes, batch.close(errors)


def _content_problem(content: Any) -> str | None:
    if not isinstance(content, str):
        return "content must be a string"
    if not _is_utf8(content):
        return "content is not valid Unicode text (lone surrogate)"
    if "\x00" in content:
        return "content must not contain NUL characters"
    return None


def parse_removals(raw: Any, *, may_write: MayWrite) -> tuple[list[Change], list[ChangeError]]:
    """Validate removals: a list of {"path", optional "expected_hash"} (hideNotes, DELETE)."""
    if not isinstance(raw, list):
        return [], [ChangeError("", "paths must be an array")]
    if too_many := _too_many(raw):
        return [], too_many
    batch = Batch(may_write)
    changes: list[Change] = []
    errors: list[ChangeError] = []
    for index, item in enumerate(raw):
        path = item.get("path") if isinstance(item, dict) else None
        if not isinstance(path, str):
            errors.append(ChangeError(f"#{index}", "path must be a string"))
            continue
        path = unicodedata.normalize("NFC", path) if _is_utf8(path) else path
        expected, problem = parse_expected(item.get("expected_hash"))
        if problem is None and expected == "":
            problem = "expected_hash must not be empty for a removal (the note must exist)"
        error = batch.admit(path, None, path_problem(path) or problem)
        if error is not None:
            errors.append(error)
            continue
        changes.append(Change(path, None, expected))
    return changes, batch.close(errors)
