"""The note store: apply a validated batch all or nothing, inside the caller's transaction.

`apply_changes` checks every `expected_hash` against rows it has locked, and raises
`Rejected` with one error per conflicting change before writing anything. Concurrent
writers to one path cannot both win: existing rows are locked (in path order, so two
batches cannot deadlock), and of two creators of the same new path the second finds the
first's row at insert time. Each applied change appends `note.changed` to the note's own
stream at the note's new version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.events import Causation, EventType, NewEvent, note_stream
from cronhooks_importer.rules import CONFLICT, Change, ChangeError, content_hash


class Rejected(Exception):
    def __init__(self, errors: list[ChangeError]) -> None:
        super().__init__("; ".join(f"{e.path}: {e.error}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Applied:
    path: str
    content_hash: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "content_hash": self.content_hash, "version": self.version}


async def apply_changes(
    conn: asyncpg.Connection,
    changes: list[Change],
    *,
    depth: int,
    writer: str,
    causation: Causation,
    now: datetime,
) -> list[Applied]:
    paths = sorted(c.path for c in changes)
    rows = await conn.fetch(
        "select path, content_hash, version from importer.notes"
        " where path = any($1::text[]) order by path for update",
        paths,
    )
    current = {r["path"]: r for r in rows}
    conflicts = [e for c in changes if (e := _conflict(c, current.get(c.path))) is not None]
    if conflicts:
        raise Rejected(conflicts)
    hashes = [content_hash(c.content) for c in changes]
    # One statement writes the whole batch. A create-only change ("" expected_hash) whose
    # path a concurrent writer created after our read returns no row: the database decided.
    written = await conn.fetch(
        """
        insert into importer.notes
            (path, content, content_hash, version, depth, updated_at, updated_by)
        select p, c, h, 1, $4, $5, $6
        from unnest($1::text[], $2::text[], $3::text[]) as x(p, c, h)
        on conflict (path) do update set
            content = excluded.content, content_hash = excluded.content_hash,
            version = importer.notes.version + 1, depth = excluded.depth,
            updated_at = excluded.updated_at, updated_by = excluded.updated_by
        where not (importer.notes.path = any($7::text[]))
        returning path, version
        """,
        [c.path for c in changes],
        [c.content for c in changes],
        hashes,
        depth,
        now,
        writer,
        [c.path for c in changes if c.expected_hash == ""],
    )
    versions = {r["path"]: r["version"] for r in written}
    lost = [c.path for c in changes if c.path not in versions]
    if lost:
        raise Rejected([ChangeError(path, "note already exists", CONFLICT) for path in lost])
    applied = [Applied(c.path, h, versions[c.path]) for c, h in zip(changes, hashes, strict=True)]
    await eventstore.append_many(
        conn,
        [
            (
                note_stream(a.path),
                a.version - 1,
                NewEvent(
                    EventType.NOTE_CHANGED,
                    {
                        "path": a.path,
                        "content_hash": a.content_hash,
                        "previous_hash": (
                            None if a.path not in current else current[a.path]["content_hash"]
                        ),
                        "version": a.version,
                        "depth": depth,
                        "writer": writer,
                        "size": len(c.content.encode()),
                    },
                ),
                causation,
            )
            for a, c in zip(applied, changes, strict=True)
        ],
        occurred_at=now,
    )
    return applied


def _conflict(change: Change, row: asyncpg.Record | None) -> ChangeError | None:
    if change.expected_hash is None:
        return None
    if change.expected_hash == "":
        return (
            None
            if row is None
            else ChangeError(change.path, "note already exists (expected_hash is empty)", CONFLICT)
        )
    if row is None:
        return ChangeError(change.path, "note does not exist (expected_hash given)", CONFLICT)
    if row["content_hash"] != change.expected_hash:
        return ChangeError(
            change.path,
            f"expected_hash mismatch (current {row['content_hash']})",
            CONFLICT,
        )
    return None
