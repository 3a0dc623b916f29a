"""The notes of change deliveries an admin asks for — `triggerChangeWebhook` and the
replay of a change delivery (CONTRACT §11, §12) — as they are now, in the read model.

What each change shows is cronhooks_common.change_payload's to say (readPatterns,
includeContent, removals, the 1 MiB cap), as for the matcher's deliveries. The content is
read only where that function will show it: the sizes come first (`octet_length` reads a
stored value's length without fetching it), each delivery's running total is summed in
path order, and only notes that fit under the cap are read whole. A trigger of 1,000 notes
of 1 MiB reads 1 MiB of content, not 1 GB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, NotRequired, TypedDict

import asyncpg

from cronhooks_admin.commands import queries as sql
from cronhooks_common.change_payload import (
    MAX_CHANGE_CONTENT_BYTES,
    ChangePayload,
    carries_content,
    change_payload,
)
from cronhooks_common.events.delivery import ChangeEvent


class Wanted(NamedTuple):
    """A change a delivery is to carry: which note and what happened to it; `version`
    stands for a note that no longer exists (a replay's, as first sent)."""

    path: str
    event: ChangeEvent
    version: int = 0


class Named(TypedDict):
    path: str
    event: ChangeEvent


class NoteNow(Named):
    """A wanted change with its note as it is now, as change_payload reads it."""

    version: int
    content_hash: str | None  # null: the note no longer exists
    size: int | None  # of the content, UTF-8 bytes
    content: NotRequired[str | None]  # read where change_payload will show it


async def notes_now(
    conn: asyncpg.Connection,
    config: Mapping[str, Any],
    deliveries: Sequence[Sequence[Wanted]],
    *,
    cap: int = MAX_CHANGE_CONTENT_BYTES,
) -> list[dict[str, asyncpg.Record]]:
    """For each delivery's wanted changes, its notes as they are now (queries.NOTES_NOW),
    by path (a path with no note is absent): version, content_hash, size, removed, and
    the content where change_payload will show it (else null)."""
    index, paths, shown = [], [], []
    for i, changes in enumerate(deliveries):
        for change in changes:
            index.append(i)
            paths.append(change.path)
            shown.append(carries_content(config, _named(change)))
    found: list[dict[str, asyncpg.Record]] = [{} for _ in deliveries]
    if paths:
        for row in await conn.fetch(sql.NOTES_NOW, index, paths, shown, cap):
            found[row["i"]][row["path"]] = row
    return found


def payload_now(
    config: Mapping[str, Any],
    changes: Sequence[Wanted],
    notes: Mapping[str, asyncpg.Record],
    *,
    cap: int = MAX_CHANGE_CONTENT_BYTES,
) -> ChangePayload:
    """The payload of `changes` (their paths and events) with the notes' current version,
    hash and content; a note that no longer exists shows neither hash nor content."""
    current: list[NoteNow] = []
    for change in changes:
        note = notes.get(change.path)
        if note is None or note["removed"]:
            version = change.version if note is None else note["version"]
            current.append(
                {
                    "path": change.path,
                    "event": change.event,
                    "version": version,
                    "content_hash": None,
                    "size": None,
                }
            )
        else:
            current.append(
                {
                    "path": change.path,
                    "event": change.event,
                    "version": note["version"],
                    "content_hash": note["content_hash"],
                    "size": note["size"],
                    "content": note["content"],
                }
            )
    return change_payload(config, current, cap=cap)


def _named(change: Wanted) -> Named:
    return {"path": change.path, "event": change.event}
