"""Change kinds and surgical patches (CONTRACT §16.1). Pure.

A change item names its `kind`: absent, "", "upsert" or "write" carry the full `content`;
"patch" carries `find` (non-empty) and `replace` (default "") instead. A patch is resolved
against the note as it is when the batch holds its row locked (store.py), never against
an earlier read: `find` must occur exactly once in that content (non-overlapping
occurrences counted left to right, as `str.count` counts them).

A write or patch whose result is the note's current content is a no-op: applied without a
new version, without `note.changed`, and so without any change delivery.
"""

from __future__ import annotations

from dataclasses import dataclass

WRITE_KINDS = frozenset({"", "upsert", "write"})
PATCH = "patch"
FIND_REQUIRED = "find is required for a patch"
# A kind is echoed in its error; a longer one is cut there (the error must stay one line
# a log can hold, whatever an agent sends).
_KIND_SHOWN = 100


@dataclass(frozen=True, slots=True)
class Patch:
    find: str  # non-empty
    replace: str


def kind_problem(kind: object) -> str | None:
    """What is wrong with a change's `kind`, if anything (absent: None)."""
    if kind is None:
        return None
    if not isinstance(kind, str):
        return "kind must be a string"
    if kind == PATCH or kind in WRITE_KINDS:
        return None
    shown = kind if len(kind) <= _KIND_SHOWN else kind[:_KIND_SHOWN] + "…"
    return f'unknown change kind "{shown}"'


def not_found(path: str) -> str:
    return f"note not found for patch: {path}"


def find_not_found(path: str) -> str:
    return f"patch find string not found in {path}"


def ambiguous(path: str, count: int) -> str:
    return f"patch find string is ambiguous ({count} occurrences) in {path}"


def apply_patch(path: str, current: str | None, patch: Patch) -> tuple[str | None, str | None]:
    """(new content, None) or (None, the error): `current` is the note's content, None
    when the note does not exist or is removed."""
    if current is None:
        return None, not_found(path)
    count = current.count(patch.find)
    if count == 0:
        return None, find_not_found(path)
    if count > 1:
        return None, ambiguous(path, count)
    return current.replace(patch.find, patch.replace, 1), None


def patched_size(current_size: int, patch: Patch) -> int:
    """The bytes a patch would leave, if `find` occurs once: known before the content is
    read, so a batch that would write too much is refused without loading its notes."""
    return current_size - len(patch.find.encode()) + len(patch.replace.encode())


def is_noop(new_hash: str, current_hash: str | None) -> bool:
    """Whether writing content of `new_hash` changes nothing: the note exists (its hash is
    given, None when it does not exist or is removed) with the same content."""
    return current_hash is not None and current_hash == new_hash
