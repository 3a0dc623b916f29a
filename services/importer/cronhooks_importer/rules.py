"""The rules a batch of note changes must pass (CONTRACT §5). Pure.

Every change is checked and every violation reported (one error per offending change);
the caller writes nothing unless the whole batch passes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from cronhooks_common.globs import matches_any

MAX_PATH_BYTES = 512
MAX_NOTE_BYTES = 1 << 20  # 1 MiB per note
MAX_BATCH_CHANGES = 1000
MAX_BATCH_BYTES = 16 << 20
_HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # normalised (NFC)
    content: str
    expected_hash: str | None  # None: no check; "": must not exist; else the current hash


INVALID, TOO_LARGE, FORBIDDEN, CONFLICT = "invalid", "too_large", "forbidden", "conflict"


@dataclass(frozen=True, slots=True)
class ChangeError:
    path: str
    error: str
    kind: str = INVALID  # invalid | too_large | forbidden | conflict

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def path_problem(path: str) -> str | None:
    """Why `path` is not a valid note path, or None."""
    if not path:
        return "path is empty"
    if not _is_utf8(path):
        return "path is not valid Unicode text (lone surrogate)"
    if len(path.encode()) > MAX_PATH_BYTES:
        return f"path is longer than {MAX_PATH_BYTES} bytes"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in path):
        return "path contains NUL or control characters"
    if path.startswith("/"):
        return "path must be relative (no leading /)"
    if "\\" in path:
        return "path must use / as separator (no backslash)"
    for segment in path.split("/"):
        if segment == "":
            return "path has an empty segment (// or a trailing /)"
        if segment == "..":
            return "path must not contain .. segments"
        if segment == ".":
            return "path must not contain . segments"
    return None


allowed = matches_any  # shell-style globs over the whole path; `*` also matches `/`


def pattern_problem(pattern: str) -> str | None:
    """Why a glob cannot be used to list notes, or None."""
    if not _is_utf8(pattern):
        return "not valid Unicode text"
    if len(pattern.encode()) > MAX_PATH_BYTES:
        return f"longer than {MAX_PATH_BYTES} bytes"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in pattern):
        return "contains NUL or control characters"
    return None


def parse_changes(
    raw: Any, *, write_patterns: list[str] | tuple[str, ...]
) -> tuple[list[Change], list[ChangeError]]:
    """Validate a batch as received (JSON); return the changes and every error found."""
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
        path, content, expected = item.get("path"), item.get("content"), item.get("expected_hash")
        if not isinstance(path, str):
            errors.append(ChangeError(f"#{index}", "path must be a string"))
            continue
        path = unicodedata.normalize("NFC", path)
        problem = path_problem(path)
        if problem is None and not isinstance(content, str):
            problem = "content must be a string"
        if problem is None and not _is_utf8(content):  # type: ignore[arg-type]
            problem = "content is not valid Unicode text (lone surrogate)"
        if problem is None and "\x00" in content:  # type: ignore[operator]
            problem = "content must not contain NUL characters"
        if problem is None and expected is not None and not isinstance(expected, str):
            problem = "expected_hash must be a string"
        if problem is None and expected and not _HASH.match(expected):
            problem = "expected_hash must be empty or 64 lowercase hex characters"
        if problem is None and path in seen:
            problem = "path appears twice in the batch"
        if problem is not None:
            errors.append(ChangeError(path, problem))
            continue
        size = len(content.encode())  # type: ignore[union-attr]
        total += size
        if size > MAX_NOTE_BYTES:
            errors.append(
                ChangeError(path, f"content is larger than {MAX_NOTE_BYTES} bytes", TOO_LARGE)
            )
            continue
        if not allowed(path, write_patterns):
            errors.append(ChangeError(path, "path is outside the write patterns", FORBIDDEN))
            continue
        seen.add(path)
        changes.append(Change(path, content, expected))  # type: ignore[arg-type]
    if total > MAX_BATCH_BYTES:
        errors.append(ChangeError("", f"batch is larger than {MAX_BATCH_BYTES} bytes", TOO_LARGE))
    return changes, errors
