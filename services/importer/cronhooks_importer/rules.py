"""The rules a batch of note changes must pass (CONTRACT §5). Pure.

Every change is checked and every violation reported (one error per offending change);
the caller writes nothing unless the whole batch passes. A batch holds writes (content)
and removals (`content` None: the note is hidden).
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

from cronhooks_common.events import storable
from cronhooks_common.globs import matches_any
from cronhooks_common.paths import MAX_PATH_BYTES, path_problem

__all__ = ["MAX_PATH_BYTES", "path_problem"]

MAX_NOTE_BYTES = 1 << 20  # 1 MiB per note
MAX_BATCH_CHANGES = 1000
MAX_BATCH_BYTES = 16 << 20
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

    def to_json(self) -> dict[str, str]:
        # The offending path as sent may hold what an event cannot (NUL, a lone surrogate):
        # shown with U+FFFD in its place, in the answer and in the notes.rejected event.
        return {"path": storable(self.path), "error": storable(self.error)}


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


def parse_changes(raw: Any, *, may_write: MayWrite) -> tuple[list[Change], list[ChangeError]]:
    """Validate a batch of writes as received (JSON); return the changes and every error.
    `may_write` says which paths the writer may write (its patterns)."""
    if not isinstance(raw, list):
        return [], [ChangeError("", "changes must be an array")]
    if len(raw) > MAX_BATCH_CHANGES:
        return [], [ChangeError("", f"at most {MAX_BATCH_CHANGES} changes per batch", TOO_LARGE)]
    changes: list[Change] = []
    errors: list[ChangeError] = []
    seen: set[str] = set()
    total = 0
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
        if problem is None and path in seen:
            problem = "path appears twice in the batch"
        if problem is not None:
            errors.append(ChangeError(path, problem))
            continue
        assert isinstance(content, str)
        size = len(content.encode())
        total += size
        if size > MAX_NOTE_BYTES:
            errors.append(
                ChangeError(path, f"content is larger than {MAX_NOTE_BYTES} bytes", TOO_LARGE)
            )
            continue
        if not may_write(path):
            errors.append(ChangeError(path, "path is outside the write patterns", FORBIDDEN))
            continue
        seen.add(path)
        changes.append(Change(path, content, expected))
    if total > MAX_BATCH_BYTES:
        errors.append(ChangeError("", f"batch is larger than {MAX_BATCH_BYTES} bytes", TOO_LARGE))
    return changes, errors


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
    if len(raw) > MAX_BATCH_CHANGES:
        return [], [ChangeError("", f"at most {MAX_BATCH_CHANGES} paths per batch", TOO_LARGE)]
    changes: list[Change] = []
    errors: list[ChangeError] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        path = item.get("path") if isinstance(item, dict) else None
        if not isinstance(path, str):
            errors.append(ChangeError(f"#{index}", "path must be a string"))
            continue
        path = unicodedata.normalize("NFC", path) if _is_utf8(path) else path
        expected, problem = parse_expected(item.get("expected_hash"))
        if problem is None and expected == "":
            problem = "expected_hash must not be empty for a removal (the note must exist)"
        problem = path_problem(path) or problem
        if problem is None and path in seen:
            problem = "path appears twice in the batch"
        if problem is not None:
            errors.append(ChangeError(path, problem))
            continue
        if not may_write(path):
            errors.append(ChangeError(path, "path is outside the write patterns", FORBIDDEN))
            continue
        seen.add(path)
        changes.append(Change(path, None, expected))
    return changes, errors
