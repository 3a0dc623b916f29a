"""Every SQL statement of the importer, by the table it touches (migrations/ defines them).

- `importer.notes`: the note store (store.py writes it, agent_notes.py reads it);
- `importer.note_ids`: a stable id per path, given on first sight;
- `importer.staged_changes`: pushes staged with `skipCommit`, until committed or expired;
- `shared.api_keys`: the API keys admin-api issues (callers.py looks them up);
- `importer.change_webhooks`, `importer.change_requests`, `importer.change_matcher_checkpoint`:
  the change matcher's copy of the change webhooks, its claims, and where it stands.

The change matcher's statements live in matcher_queries.py (re-exported here, so every
statement is still `queries.…`). Functions run inside the caller's transaction (the
connection it passes) and take and return plain values: the rules about them live with
their callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeAlias

import asyncpg

from cronhooks_importer.matcher_queries import (
    change_webhook_config,
    change_webhook_configs,
    claim_change_requests,
    count_chain_deliveries,
    forget_change_webhook,
    forget_idle_chains,
    keep_change_webhook,
    matcher_checkpoint,
    move_matcher_checkpoint,
    next_alert_id,
    queue_alert_post,
    try_lock_matcher,
)
from cronhooks_importer.patches import Patch
from cronhooks_importer.rules import Change, content_hash

Db: TypeAlias = asyncpg.Connection | asyncpg.Pool

__all__ = [
    "change_webhook_config",
    "change_webhook_configs",
    "claim_change_requests",
    "count_chain_deliveries",
    "forget_change_webhook",
    "forget_idle_chains",
    "keep_change_webhook",
    "matcher_checkpoint",
    "move_matcher_checkpoint",
    "next_alert_id",
    "queue_alert_post",
    "try_lock_matcher",
]

# --- importer.notes ----------------------------------------------------------------------


async def lock_notes(conn: asyncpg.Connection, paths: Sequence[str]) -> list[asyncpg.Record]:
    """The rows of `paths` that exist (hidden ones too), locked in path order: two batches
    lock their common rows in the same order, so they cannot deadlock."""
    rows: list[asyncpg.Record] = await conn.fetch(
        "select path, content_hash, version, removed, octet_length(content) as size"
        " from importer.notes where path = any($1::text[]) order by path for update",
        sorted(paths),
    )
    return rows


async def note_contents(conn: asyncpg.Connection, paths: Sequence[str]) -> dict[str, str]:
    """The content of the visible notes among `paths` (rows the caller has locked: what a
    patch applies to is what the batch writes over)."""
    rows = await conn.fetch(
        "select path, content from importer.notes where path = any($1::text[]) and not removed",
        list(paths),
    )
    return {r["path"]: r["content"] for r in rows}


async def write_notes(
    conn: asyncpg.Connection, writes: Sequence[Change], *, depth: int, writer: str, now: datetime
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


async def hide_notes(
    conn: asyncpg.Connection, paths: Sequence[str], *, depth: int, writer: str, now: datetime
) -> dict[str, int]:
    """Hide notes: each removal is a version of its own; returns path → new version."""
    if not paths:
        return {}
    rows = await conn.fetch(
        """
        update importer.notes set removed = true, version = version + 1, depth = $2,
            updated_at = $3, updated_by = $4
        where path = any($1::text[]) and not removed
        returning path, version
        """,
        list(paths),
        depth,
        now,
        writer,
    )
    return {r["path"]: r["version"] for r in rows}


async def readable_notes(
    db: Db, *, prefix: str, regex: str, limit: int, pattern_sets: Sequence[Sequence[str]]
) -> list[asyncpg.Record]:
    """Visible notes whose path is `like prefix`, matches `regex` and one regex of every
    set, by path: rows the caller may not read never leave the database."""
    readable = "".join(f" and path ~ any(${n + 4}::text[])" for n in range(len(pattern_sets)))
    rows: list[asyncpg.Record] = await db.fetch(
        "select path, content_hash, version, updated_at from importer.notes"
        f" where path like $1 and path ~ $2 and not removed{readable}"
        " order by path limit $3",
        prefix,
        regex,
        limit,
        *pattern_sets,
    )
    return rows


async def visible_note(db: Db, path: str) -> asyncpg.Record | None:
    record: asyncpg.Record | None = await db.fetchrow(
        "select path, content, content_hash, version, depth, updated_at from importer.notes"
        " where path = $1 and not removed",
        path,
    )
    return record


# --- importer.note_ids -------------------------------------------------------------------


async def note_ids(conn: asyncpg.Connection, paths: Sequence[str]) -> dict[str, int]:
    """The stable id of each path, given on first sight and never reused."""
    if not paths:
        return {}
    await conn.execute(
        "insert into importer.note_ids (path) select unnest($1::text[]) order by 1"
        " on conflict (path) do nothing",
        list(paths),
    )
    rows = await conn.fetch(
        "select path, id from importer.note_ids where path = any($1::text[])", list(paths)
    )
    return {r["path"]: r["id"] for r in rows}


# --- importer.staged_changes -------------------------------------------------------------


async def stage_changes(
    conn: asyncpg.Connection,
    owner: str,
    changes: Sequence[Change],
    *,
    now: datetime,
    expires_at: datetime | None,
) -> None:
    """Keep `changes` for `owner`; a path staged again replaces its update."""
    await conn.execute(
        """
        insert into importer.staged_changes
            (owner, path, content, expected_hash, staged_at, expires_at, find, replace)
        select $1, p, c, h, $5, $6, f, r
        from unnest($2::text[], $3::text[], $4::text[], $7::text[], $8::text[]) as x(p, c, h, f, r)
        on conflict (owner, path) do update set
            content = excluded.content, expected_hash = excluded.expected_hash,
            staged_at = excluded.staged_at, expires_at = excluded.expires_at,
            find = excluded.find, replace = excluded.replace
        """,
        owner,
        [c.path for c in changes],
        [c.content for c in changes],
        [c.expected_hash for c in changes],
        now,
        expires_at,
        [c.patch.find if c.patch else None for c in changes],
        [c.patch.replace if c.patch else None for c in changes],
    )


async def staged_size(conn: asyncpg.Connection, owner: str) -> tuple[int, int]:
    """(changes, bytes of content) `owner` has staged: from the sizes, nothing loaded."""
    row = await conn.fetchrow(
        "select count(*) as changes, coalesce(sum(coalesce(octet_length(content), 0)"
        " + coalesce(octet_length(find), 0) + coalesce(octet_length(replace), 0)), 0) as size"
        " from importer.staged_changes where owner = $1",
        owner,
    )
    return int(row["changes"]), int(row["size"])


async def staged_changes(conn: asyncpg.Connection, owner: str) -> list[Change]:
    """What `owner` staged, by path, locked until the commit ends."""
    rows = await conn.fetch(
        "select path, content, expected_hash, find, replace from importer.staged_changes"
        " where owner = $1 order by path for update",
        owner,
    )
    return [
        Change(
            r["path"],
            r["content"],
            r["expected_hash"],
            None if r["find"] is None else Patch(r["find"], r["replace"]),
        )
        for r in rows
    ]


async def unstage(conn: asyncpg.Connection, owner: str, paths: Sequence[str]) -> None:
    await conn.execute(
        "delete from importer.staged_changes where owner = $1 and path = any($2)",
        owner,
        list(paths),
    )


async def forget_expired_stages(conn: asyncpg.Connection, now: datetime) -> None:
    await conn.execute(
        "delete from importer.staged_changes where expires_at is not null and expires_at <= $1",
        now,
    )


# --- shared.api_keys ---------------------------------------------------------------------


async def live_api_key(db: Db, key_hash: str) -> asyncpg.Record | None:
    """The key with this hash (id, name, skip_webhooks), unless unknown or revoked."""
    record: asyncpg.Record | None = await db.fetchrow(
        "select id, name, skip_webhooks from shared.api_keys"
        " where key_hash = $1 and revoked_at is null",
        key_hash,
    )
    return record
