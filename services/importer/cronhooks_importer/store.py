"""The note store: apply a validated batch all or nothing, inside the caller's transaction.

`apply_changes` checks every `expected_hash` against rows it has locked, and raises
`Rejected` with one error per conflicting change before writing anything. Concurrent
writers to one path cannot both win: existing rows are locked (in path order, so two
batches cannot deadlock), and of two creators of the same new path the second finds the
first's row at insert time. A removal hides the note: the row stays (its version keeps
counting), reads skip it, and a later write recreates it at the next version.

A patch (CONTRACT §16.1) is resolved against the locked row, after its `expected_hash` is
checked, so two patches to one note apply one after the other, each to what the other
left. A write or patch that leaves the note as it is (a no-op) writes nothing: it is
answered with the note's current version and hash and has no event.

Each applied change appends `note.changed` to the note's own stream at the note's new
version, all with the batch's `batch_id`, carrying the content written (null on remove):
the event store holds every note's history.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.events import (
    UNSET,
    AppliedChange,
    Causation,
    NewEvent,
    NoteChanged,
    note_stream,
)
from cronhooks_common.traces import Origin
from cronhooks_importer import queries
from cronhooks_importer.resolution import Current, conflict, noops, resolve_patches, too_much
from cronhooks_importer.rules import CONFLICT, Change, ChangeError, content_hash

__all__ = ["Applied", "Current", "Rejected", "apply_changes", "note_changed"]


class Rejected(Exception):
    def __init__(self, errors: list[ChangeError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.error}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Applied:
    path: str
    content_hash: str | None  # None: removed
    version: int  # 0: staged, not applied yet (agent_notes.py)
    # unchanged: a no-op, answered with the current version; no event names it
    event: Literal["create", "update", "remove", "staged", "unchanged"]

    @property
    def changed(self) -> bool:
        """Whether the note has a new version (what verdicts and note.changed list)."""
        return self.event not in ("staged", "unchanged")

    @property
    def change(self) -> AppliedChange:
        """As a verdict lists it (`notes.imported`) and the token API answers it."""
        return AppliedChange(path=self.path, content_hash=self.content_hash, version=self.version)


async def apply_changes(
    conn: asyncpg.Connection,
    changes: list[Change],
    *,
    depth: int,
    writer: str,
    causation: Causation,
    now: datetime,
    skip_webhooks: bool = False,
    origin: Origin | None = None,
) -> list[Applied]:
    """Apply `changes` (writes, patches and removals) as one batch; return them in the
    given order."""
    rows = await queries.lock_notes(conn, [c.path for c in changes])
    current = {
        r["path"]: Current(r["content_hash"], r["version"], r["removed"], r["size"]) for r in rows
    }
    conflicts = {c.path: e for c in changes if (e := conflict(c, current.get(c.path)))}
    # Patches are resolved even beside conflicts: every offending change is named, in the
    # batch's order (a path is in a batch once).
    ok = [c for c in changes if c.path not in conflicts]
    resolved, errors = await _resolved(conn, ok, current)
    if conflicts or errors:
        named = {**conflicts, **{e.path: e for e in errors}}
        raise Rejected([named[c.path] for c in changes if c.path in named])
    changes = resolved
    visible = {path: row.content_hash for path, row in current.items() if row.exists}
    unchanged = noops(changes, visible)
    writes = [c for c in changes if not c.removes and c.path not in unchanged]
    written = await queries.write_notes(conn, writes, depth=depth, writer=writer, now=now)
    removed = await queries.hide_notes(
        conn, [c.path for c in changes if c.removes], depth=depth, writer=writer, now=now
    )
    versions = {**written, **removed}
    lost = [c.path for c in writes if c.path not in versions]
    if lost:
        raise Rejected([ChangeError(path, "note already exists", CONFLICT) for path in lost])
    applied = [
        _unchanged(c.path, current[c.path])
        if c.path in unchanged
        else _applied(c, versions[c.path], current.get(c.path))
        for c in changes
    ]
    batch_id = str(uuid.uuid4())
    await eventstore.append_many(
        conn,
        [
            (
                note_stream(a.path),
                a.version - 1,
                NewEvent.of(
                    note_changed(
                        a, c, current.get(c.path), depth, writer, batch_id, skip_webhooks, origin
                    )
                ),
                causation,
            )
            for a, c in zip(applied, changes, strict=True)
            if a.changed
        ],
        occurred_at=now,
    )
    return applied


async def _resolved(
    conn: asyncpg.Connection, changes: list[Change], current: dict[str, Current]
) -> tuple[list[Change], list[ChangeError]]:
    """The batch with every patch resolved against its locked note, or the patches' errors
    (a batch too large to resolve is `Rejected` at once, as a whole)."""
    if not any(c.patch is not None for c in changes):
        return changes, []
    # The size first, from the rows' sizes: a batch too large is never loaded.
    sizes = {path: row.size for path, row in current.items() if row.exists}
    too_large = too_much(changes, sizes)
    if too_large:
        raise Rejected(too_large)
    contents = await queries.note_contents(conn, [c.path for c in changes if c.patch])
    return resolve_patches(changes, contents)


def _unchanged(path: str, row: Current) -> Applied:
    return Applied(path, row.content_hash, row.version, "unchanged")


def _applied(change: Change, version: int, before: Current | None) -> Applied:
    if change.removes:
        return Applied(change.path, None, version, "remove")
    # Without a row at our read, version 1 is ours; a higher one means a concurrent writer
    # created the path between our read and our write (an unconditional write updated it).
    created = (before is None and version == 1) or (before is not None and before.removed)
    return Applied(
        change.path, content_hash(change.content or ""), version, "create" if created else "update"
    )


def note_changed(
    applied: Applied,
    change: Change,
    before: Current | None,
    depth: int,
    writer: str,
    batch_id: str,
    skip_webhooks: bool,
    origin: Origin | None = None,
) -> NoteChanged:
    """`note.changed` (CONTRACT §6): path, event, version, content_hash, depth, batch_id;
    `skip_webhooks` when written with such an API key (its batch fires no change webhook)."""
    event = applied.event
    assert event != "staged" and event != "unchanged"
    return NoteChanged(
        path=applied.path,
        event=event,
        version=applied.version,
        content_hash=applied.content_hash,
        previous_hash=before.content_hash if before is not None and before.exists else None,
        depth=depth,
        writer=writer,
        size=None if change.content is None else len(change.content.encode()),
        content=change.content,
        batch_id=batch_id,
        skip_webhooks=skip_webhooks,
        written_by=UNSET if origin is None else origin.written_by,
        trace=UNSET if origin is None else origin.chain,
    )
