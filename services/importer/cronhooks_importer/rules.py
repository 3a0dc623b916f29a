"""The rules a batch of note changes must pass (CONTRACT §5, §15, §16.1). Pure.

Every change is checked and every violation reported (one error per offending change);
the caller writes nothing unless the whole batch passes. A batch holds writes (content),
patches (find/replace, resolved against the locked note by store.py) and removals
(neither: the note is hidden).

Every way into the store — a push, a staged push, a commit of what was staged, a removal,
an agent's answer — passes the same batch rules (`Batch`): each path at most once, each
note at most 1 MiB, the writer's write patterns as they are now, and at most 1,000 changes
and 2 MiB of content in all (the most one push can carry).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cronhooks_common.events import ChangeRefused, storable
from cronhooks_common.globs import matches_any
from cronhooks_common.paths import MAX_PATH_BYTES, path_problem
from cronhooks_importer.hashes import content_hash, normalize_hash, parse_expected
from cronhooks_importer.patches import FIND_REQUIRED, PATCH, Patch, kind_problem

__all__ = ["MAX_PATH_BYTES", "content_hash", "normalize_hash", "path_problem"]

MAX_NOTE_BYTES = 1 << 20  # 1 MiB per note
MAX_BATCH_CHANGES = 1000
# 2 MiB of content: the most a push can carry (its body is at most 2 MiB), and so the
# most a commit of staged pushes may apply at once.
MAX_BATCH_BYTES = 2 << 20
TOO_MANY_CHANGES = f"at most {MAX_BATCH_CHANGES:,} changes in a batch"
TOO_MANY_BYTES = f"at most {MAX_BATCH_BYTES >> 20} MiB of content in a batch"
TWICE = "path appears twice in the batch"


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # normalised (NFC)
    content: str | None  # None: remove (hide) the note, unless it is a patch
    expected_hash: str | None  # None: no check; "": must not exist; else the current hash (hex)
    patch: Patch | None = None  # kind "patch": content is None until store.py resolves it

    @property
    def removes(self) -> bool:
        return self.content is None and self.patch is None

    @property
    def size(self) -> int:
        """The bytes of content the change carries (a patch: its find and replace)."""
        if self.patch is not None:
            return len(self.patch.find.encode()) + len(self.patch.replace.encode())
        return len(self.content.encode()) if self.content is not None else 0


INVALID, TOO_LARGE, FORBIDDEN, CONFLICT, MISSING = (
    "invalid",
    "too_large",
    "forbidden",
    "conflict",
    "missing",
)


_FIELDS = (
    "path",
    "content",
    "expected_hash",
    "changes",
    "paths",
    "depth",
    "kind",
    "find",
    "replace",
)
CONTENT_NOT_STRING = "content must be a string"
# GraphQL's PushNoteInput: content may be left out, but only by a patch (CONTRACT §16.1).
CONTENT_REQUIRED = "content is required unless kind is patch"


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
        if self.error.startswith("unknown change kind"):
            return "kind"
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

    def admit(self, path: str, size: int, problem: str | None = None) -> ChangeError | None:
        """What is wrong with one more change of `size` bytes, if anything: its own
        `problem` as parsed (path, kind, content, expected_hash) first, then the batch's
        rules."""
        twice = path in self._seen
        self._seen.add(path)
        self._count += 1
        if problem is not None:
            return ChangeError(path, problem)
        if twice:
            return ChangeError(path, TWICE)
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
    errors = [e for c in changes if (e := batch.admit(c.path, c.size)) is not None]
    return batch.close(errors)


def _too_many(raw: list[Any]) -> list[ChangeError]:
    # Counted before anything is parsed: a huge batch costs no more than its length.
    return batch_limits(len(raw), 0)


def parse_changes(
    raw: Any, *, may_write: MayWrite, no_content: str = CONTENT_NOT_STRING
) -> tuple[list[Change], list[ChangeError]]:
    """Validate a batch of writes and patches as received (JSON); return the changes and
    every error. `may_write` says which paths the writer may write (its patterns);
    `no_content` is the error of a write without content (absent or null)."""
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
        path = item.get("path")
        if not isinstance(path, str):
            errors.append(ChangeError(f"#{index}", "path must be a string"))
            continue
        path = unicodedata.normalize("NFC", path) if _is_utf8(path) else path
        expected, problem = parse_expected(item.get("expected_hash"))
        change, own = _parse_item(item, path, expected, no_content)
        problem = path_problem(path) or own or problem
        error = batch.admit(path, change.size if problem is None else 0, problem)
        if error is not None:
            errors.append(error)
            continue
        changes.append(change)
    return changes, batch.close(errors)


def _parse_item(
    item: dict[str, Any], path: str, expected: str | None, no_content: str
) -> tuple[Change, str | None]:
    """One change of its kind, or what is wrong with its kind, content, find or replace."""
    kind = item.get("kind")
    if problem := kind_problem(kind):
        return Change(path, None, expected), problem
    if kind != PATCH:
        content = item.get("content")
        if content is None:
            return Change(path, None, expected), no_content
        problem = _text_problem("content", content)
        return Change(path, content if problem is None else None, expected), problem
    find, replace = item.get("find"), item.get("replace")
    replace = "" if replace is None else replace
    problem = (
        FIND_REQUIRED if find is None or find == "" else _text_problem("find", find)
    ) or _text_problem("replace", replace)
    if problem is not None:
        return Change(path, None, expected), problem
    assert isinstance(find, str) and isinstance(replace, str)
    return Change(path, None, expected, Patch(find, replace)), None


def _text_problem(name: str, text: Any) -> str | None:
    if not isinstance(text, str):
        return f"{name} must be a string"
    if not _is_utf8(text):
        return f"{name} is not valid Unicode text (lone surrogate)"
    if "\x00" in text:
        return f"{name} must not contain NUL characters"
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
        error = batch.admit(path, 0, path_problem(path) or problem)
        if error is not None:
            errors.append(error)
            continue
        changes.append(Change(path, None, expected))
    return changes, batch.close(errors)
