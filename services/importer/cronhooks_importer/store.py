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
from typing import Any

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.events import Causation, EventType, NewEvent, note_stream
from cronhooks_importer.rules import CONFLICT, MISSING, Change, ChangeError, content_hash


class Rejected(Exception):
    def __init__(self, errors: list[ChangeError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.error}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Applied:
    path: str
    content_hash: str | None  # None: removed
    version: int
    event: str  # create | update | remove

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "content_hash": self.content_hash, "version": self.version}


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
    rows = await conn.fetch(
        "select path, content_hash, version, removed from importer.notes"
        " where path = any($1::text[]) order by path for update",
        sorted(c.path for c in changes),
    )
    current = {r["path"]: Current(r["content_hash"], r["version"], r["removed"]) for r in rows}
    conflicts = [e for c in changes if (e := _conflict(c, current.get(c.path))) is not None]
    if conflicts:
        raise Rejected(conflicts)
    writes = [c for c in changes if not c.removes]
    written = await _write(conn, writes, depth=depth, writer=writer, now=now)
    removed = await _remove(conn, [c for c in changes if c.removes], depth, writer, now)
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
                NewEvent(
                    EventType.NOTE_CHANGED,
                    _event_data(a, c, current.get(c.path), depth, writer, batch_id, skip_webhooks),
                ),
                causation,
            )
            for a, c in zip(applied, changes, strict=True)
        ],
        occurred_at=now,
    )
    return applied


async def _write(
    conn: asyncpg.Connection, writes: list[Change], *, depth: int, writer: str, now: datetime
) -> dict[str, int]:
    """One statement writes every content change; returns path → new version. A create-only
    change ("" expected_hash) whose path a concurrent writer created after our read returns
    no row: the database decided. A hidden note is recreated (create-only passes)."""
    if not writes:
        return {}
    rows = await conn.fetch(
        """
        insert into importer.notes
            (path, content, content_hash, version, depth, updated_at, updated_by, removed)
        select p, c, h, 1, $4, $5, $6, false
        from unnest($1::text[], $2::text[], $3::text[]) as x(p, c, h)
        on conflict (path) do update set
            content = excluded.content, content_hash = excluded.content_hash,
            version = importer.notes.version + 1, depth = excluded.depth,
            updated_at = excluded.updated_at, updated_by = excluded.updated_by, removed = false
        where importer.notes.removed or not (importer.notes.path = any($7::text[]))
        returning path, version
        """,
        [c.path for c in writes],
        [c.content for c in writes],
        [content_hash(c.content or "") for c in writes],
        depth,
        now,
        writer,
        [c.path for c in writes if c.expected_hash == ""],
    )
    return {r["path"]: r["version"] for r in rows}


async def _remove(
    conn: asyncpg.Connection, removals: list[Change], depth: int, writer: str, now: datetime
) -> dict[str, int]:
    """Hide notes (rows locked and checked present): each removal is a version of its own."""
    if not removals:
        return {}
    rows = await conn.fetch(
        """
        update importer.notes set removed = true, version = version + 1, depth = $2,
            updated_at = $3, updated_by = $4
        where path = any($1::text[]) and not removed
        returning path, version
        """,
        [c.path for c in removals],
        depth,
        now,
        writer,
    )
    return {r["path"]: r["version"] for r in rows}


def _applied(change: Change, version: int, before: Current | None) -> Applied:
    if change.removes:
        return Applied(change.path, None, version, "remove")
    # Without a row at our read, version 1 is ours; a higher one means a concurrent writer
    # created the path between our read and our write (an unconditional write updated it).
    created = (before is None and version == 1) or (before is not None and before.removed)
    return Applied(
        change.path, content_hash(change.content or ""), version, "create" if created else "update"
    )


def _event_data(
    applied: Applied,
    change: Change,
    before: Current | None,
    depth: int,
    writer: str,
    batch_id: str,
    skip_webhooks: bool,
) -> dict[str, Any]:
    """`note.changed` (CONTRACT §6): path, event, version, content_hash, depth, batch_id;
    `skip_webhooks` when written with such an API key (its batch fires no change webhook)."""
    return {
        "path": applied.path,
        "event": applied.event,
        "version": applied.version,
        "content_hash": applied.content_hash,
        "previous_hash": before.content_hash if before is not None and before.exists else None,
        "depth": depth,
        "writer": writer,
        "size": None if change.content is None else len(change.content.encode()),
        "content": change.content,
        "batch_id": batch_id,
        "skip_webhooks": skip_webhooks,
    }


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
