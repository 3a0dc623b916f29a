"""admin.notes from `note.changed`: each note as its latest version says (a removal keeps
the row, marked `removed`), set-based like the deliveries (apply.py hands one round)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from cronhooks_admin.projections import queries as sql
from cronhooks_common.events import Event, NoteChanged


async def changed(conn: asyncpg.Connection, items: Sequence[tuple[Event, NoteChanged]]) -> None:
    if not items:
        return
    await conn.execute(
        sql.NOTES_CHANGED,
        [p.path for _, p in items],
        [p.content_hash for _, p in items],
        [p.version for _, p in items],
        [p.depth for _, p in items],
        [e.occurred_at for e, _ in items],
        [p.writer for _, p in items],
        [p.content or "" for _, p in items],
        [p.event for _, p in items],
        [p.event == "remove" for _, p in items],
        [p.written_by if isinstance(p.written_by, str) else None for _, p in items],
    )
