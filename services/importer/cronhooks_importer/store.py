"""The note store: apply a validated batch all or nothing, inside the caller's transaction.

`apply_changes` checks every `expected_hash` against rows it has locked, and raises
`Rejected` with one error per conflicting change before writing anything. Concurrent
writers to one path cannot both win: existing rows are locked (in path order, so two
batches cannot deadlock), and of two creators of the same new path the second finds the
first's row at insert time. A removal hides the note: the row stays (its version keeps
counting), reads skip it, and a later write recreates it at the next version.

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
from cronhooks_common.events import AppliedChange, Causation, NewEvent, NoteChanged, note_stream
from cronhooks_importer import queries
from cronhooks_importer.rules import CONFLICT, MISSING, Change, ChangeError, content_hash


class Rejected(Exception):
    def __init__(self, errors: list[ChangeError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.error}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Applied:
    path: str
    content_hash: str | None  # None: removed
    version: int  # 0: staged, not applied yet (agent_notes.py)
    event: Literal["create", "update", "remove", "staged"]

    @property
    def change(self) -> AppliedChange:
        """As a verdict lists it (`notes.imported`) and the token API answers it."""
        return AppliedChange(path=self.path, content_hash=self.content_hash, version=self.version)


@dataclass(frozen=True, slots=True)
class Current:
    """A note row as locked before the batch is applied."""

    content_hash: str
    version: int
    removed: bool

    @property
    def exists(self) -> bool:
        return not self.removed


async def apply_changes(
    conn: asyncpg.Connection,
    changes: list[Change],
    *,
    depth: int,
    writer: str,
    causation: Causation,
    now: datetime,
    skip_webhooks: bool = False,
) -> list[Applied]:
    """Apply `changes` (writes and removals) as one batch; return them in the given order."""
    rows = await queries.lock_notes(conn, [c.path for c in changes])
    current = {r["path"]: Current(r["content_hash"], r["version"], r["removed"]) for r in rows}
    conflicts = [e for c in changes if (e := _conflict(c, current.get(c.path))) is not None]
    if conflicts:
        raise Rejected(conflicts)
    writes = [c for c in changes if not c.removes]
    written = await queries.write_notes(conn, writes, depth=depth, writer=writer, now=now)
    removed = await queries.hide_notes(
        conn, [c.path for c in changes if c.removes], depth=depth, writer=writer, now=now
    )
    versions = {**written, **removed}
    lost = [c.path for c in writes if c.path not in versions]
    if lost:
        raise Rejected([ChangeError(path, "note already exists", CONFLICT) for path in lost])
    applied = [_applied(c, versions[c.path], current.get(c.path)) for c in changes]
    batch_id = str(uuid.uuid4())
    await eventstore.append_many(
        conn,
        [
            (
                note_stream(a.path),
                a.version - 1,
                NewEvent.of(
                    note_changed(a, c, current.get(c.path), depth, writer, batch_id, skip_webhooks)
                ),
                causation,
            )
            for a, c in zip(applied, changes, strict=True)
        ],
        occurred_at=now,
    )
    return applied


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
) -> NoteChanged:
    """`note.changed` (CONTRACT §6): path, event, version, content_hash, depth, batch_id;
    `skip_webhooks` when written with such an API key (its batch fires no change webhook)."""
    event = applied.event
    assert event != "staged"
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
    )


def _conflict(change: Change, row: Current | None) -> ChangeError | None:
    exists = row is not None and row.exists
    if change.removes and not exists:
        return ChangeError(change.path, "note does not exist", MISSING)
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
