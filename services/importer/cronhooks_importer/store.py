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
    applied: list[Applied] = []
    for change in changes:
        new_hash = content_hash(change.content)
        version = await conn.fetchval(
            """
            insert into importer.notes
                (path, content, content_hash, version, depth, updated_at, updated_by)
            values ($1, $2, $3, 1, $4, $5, $6)
            on conflict (path) do update set
                content = excluded.content, content_hash = excluded.content_hash,
                version = importer.notes.version + 1, depth = excluded.depth,
                updated_at = excluded.updated_at, updated_by = excluded.updated_by
            where $7
            returning version
            """,
            change.path,
            change.content,
            new_hash,
            depth,
            now,
            writer,
            change.expected_hash != "",  # "" = create only: an existing row is a conflict
        )
        if version is None:
            # Created by a concurrent writer after our read: the database decided.
            raise Rejected([ChangeError(change.path, "note already exists", CONFLICT)])
        previous = current.get(change.path)
        await eventstore.append(
            conn,
            note_stream(change.path),
            [
                NewEvent(
                    EventType.NOTE_CHANGED,
                    {
                        "path": change.path,
                        "content_hash": new_hash,
                        "previous_hash": None if previous is None else previous["content_hash"],
                        "version": version,
                        "depth": depth,
                        "writer": writer,
                        "size": len(change.content.encode()),
                    },
                )
            ],
            expected_version=version - 1,
            causation=causation,
            occurred_at=now,
        )
        applied.append(Applied(change.path, new_hash, version))
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
