"""A batch as it will be written, decided against the notes as locked (CONTRACT §16.1). Pure.

store.py locks the batch's rows, then asks here: whether each change may apply to its row
as it is (`expected_hash`, existence: a patch's hash is checked against the note before
the patch), how many bytes the batch would write (patches included, from the notes'
sizes alone, before any content is read), the content each patch leaves, and which writes
change nothing (no-ops: no new version, no event).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cronhooks_importer.hashes import content_hash
from cronhooks_importer.patches import apply_patch, is_noop, not_found, patched_size
from cronhooks_importer.rules import (
    CONFLICT,
    MAX_BATCH_BYTES,
    MAX_NOTE_BYTES,
    MISSING,
    TOO_LARGE,
    TOO_MANY_BYTES,
    Change,
    ChangeError,
)


@dataclass(frozen=True, slots=True)
class Current:
    """A note row as locked before the batch is applied."""

    content_hash: str
    version: int
    removed: bool
    size: int = 0  # bytes of content (of a removed note too: the row keeps it)

    @property
    def exists(self) -> bool:
        return not self.removed


def conflict(change: Change, row: Current | None) -> ChangeError | None:
    """What keeps `change` from applying to its locked `row` (None: no row), if anything."""
    exists = row is not None and row.exists
    if change.removes and not exists:
        return ChangeError(change.path, "note does not exist", MISSING)
    if change.patch is not None and not exists:
        return ChangeError(change.path, not_found(change.path), CONFLICT)
    if change.expected_hash is None:
        return None
    if change.expected_hash == "":
        if not exists:
            return None
        return ChangeError(change.path, "note already exists (expected_hash is empty)", CONFLICT)
    if not exists:
        return ChangeError(change.path, "note does not exist (expected_hash given)", CONFLICT)
    assert row is not None
    if row.content_hash != change.expected_hash:
        return ChangeError(
            change.path, f"expected_hash mismatch (current {row.content_hash})", CONFLICT
        )
    return None


def written_bytes(changes: Sequence[Change], sizes: Mapping[str, int]) -> int:
    """The bytes of content the batch would write: a patch leaves its note's size (`sizes`,
    of the notes that exist) less `find` plus `replace` when `find` occurs once."""
    total = 0
    for change in changes:
        if change.patch is not None:
            total += patched_size(sizes.get(change.path, 0), change.patch)
        else:
            total += change.size
    return total


def too_much(changes: Sequence[Change], sizes: Mapping[str, int]) -> list[ChangeError]:
    """The batch bound over what patches would write: a batch of small patches to large
    notes must not write (and carry in its events) more than any push could."""
    if not any(c.patch is not None for c in changes):
        return []  # the bound was checked on the batch as received
    size = written_bytes(changes, sizes)
    if size <= MAX_BATCH_BYTES:
        return []
    return [ChangeError("", f"{TOO_MANY_BYTES}, not {size:,} bytes", TOO_LARGE)]


def resolve_patches(
    changes: Sequence[Change], contents: Mapping[str, str]
) -> tuple[list[Change], list[ChangeError]]:
    """Every patch as the write it makes, against `contents` (the locked notes that exist
    and are not removed); or one error per patch that cannot apply."""
    resolved: list[Change] = []
    errors: list[ChangeError] = []
    for change in changes:
        if change.patch is None:
            resolved.append(change)
            continue
        content, error = apply_patch(change.path, contents.get(change.path), change.patch)
        if error is not None:
            errors.append(ChangeError(change.path, error, CONFLICT))
        elif content is not None and len(content.encode()) > MAX_NOTE_BYTES:
            errors.append(
                ChangeError(
                    change.path, f"content is larger than {MAX_NOTE_BYTES} bytes", TOO_LARGE
                )
            )
        else:
            resolved.append(dataclasses.replace(change, content=content, patch=None))
    return resolved, errors


def noops(changes: Sequence[Change], hashes: Mapping[str, str]) -> set[str]:
    """The paths whose write leaves the note as it is (`hashes`: of the notes that exist
    and are not removed); a removal always changes something."""
    return {
        c.path
        for c in changes
        if c.content is not None and is_noop(content_hash(c.content), hashes.get(c.path))
    }
