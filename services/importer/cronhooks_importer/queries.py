"""Every SQL statement of the importer, by the table it touches (migrations/ defines them).

- `importer.notes`: the note store (store.py writes it, agent_notes.py reads it);
- `importer.note_ids`: a stable id per path, given on first sight;
- `importer.staged_changes`: pushes staged with `skipCommit`, until committed or expired;
- `shared.api_keys`: the API keys admin-api issues (callers.py looks them up);
- `importer.change_webhooks`, `importer.change_requests`, `importer.change_matcher_checkpoint`:
  the change matcher's copy of the change webhooks, its claims, and where it stands.

Functions run inside the caller's transaction (the connection it passes) and take and
return plain values: the rules about them live with their callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg

from cronhooks_common.tail import Checkpoint
from cronhooks_importer.rules import Change, content_hash

Db: TypeAlias = asyncpg.Connection | asyncpg.Pool

# --- importer.notes ----------------------------------------------------------------------


async def lock_notes(conn: asyncpg.Connection, paths: Sequence[str]) -> list[asyncpg.Record]:
    """The rows of `paths` that exist (hidden ones too), locked in path order: two batches
    lock their common rows in the same order, so they cannot deadlock."""
    rows: list[asyncpg.Record] = await conn.fetch(
        "select path, content_hash, version, removed from importer.notes"
        " where path = any($1::text[]) order by path for update",
        sorted(paths),
    )
    return rows


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
            (owner, path, content, expected_hash, staged_at, expires_at)
        select $1, p, c, h, $5, $6
        from unnest($2::text[], $3::text[], $4::text[]) as x(p, c, h)
        on conflict (owner, path) do update set
            content = excluded.content, expected_hash = excluded.expected_hash,
            staged_at = excluded.staged_at, expires_at = excluded.expires_at
        """,
        owner,
        [c.path for c in changes],
        [c.content for c in changes],
        [c.expected_hash for c in changes],
        now,
        expires_at,
    )


async def staged_size(conn: asyncpg.Connection, owner: str) -> tuple[int, int]:
    """(changes, bytes of content) `owner` has staged: from the sizes, nothing loaded."""
    row = await conn.fetchrow(
        "select count(*) as changes, coalesce(sum(octet_length(content)), 0) as size"
        " from importer.staged_changes where owner = $1",
        owner,
    )
    return int(row["changes"]), int(row["size"])


async def staged_changes(conn: asyncpg.Connection, owner: str) -> list[Change]:
    """What `owner` staged, by path, locked until the commit ends."""
    rows = await conn.fetch(
        "select path, content, expected_hash from importer.staged_changes"
        " where owner = $1 order by path for update",
        owner,
    )
    return [Change(r["path"], r["content"], r["expected_hash"]) for r in rows]


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


# --- the change matcher ------------------------------------------------------------------


async def try_lock_matcher(conn: asyncpg.Connection, lock: int) -> bool:
    """The matcher's advisory lock for this transaction, if no other replica holds it."""
    return bool(await conn.fetchval("select pg_try_advisory_xact_lock($1)", lock))


async def matcher_checkpoint(conn: asyncpg.Connection) -> Checkpoint:
    row = await conn.fetchrow("select txid, position from importer.change_matcher_checkpoint")
    return Checkpoint(row["txid"], row["position"])


async def move_matcher_checkpoint(conn: asyncpg.Connection, to: Checkpoint) -> None:
    await conn.execute(
        "update importer.change_matcher_checkpoint set txid = $1, position = $2",
        to.txid,
        to.position,
    )


async def change_webhook_configs(conn: asyncpg.Connection) -> list[tuple[int, Any]]:
    """(webhook id, configuration as its events carried it) of every kept change webhook."""
    rows = await conn.fetch("select webhook_id, config from importer.change_webhooks")
    return [(r["webhook_id"], r["config"]) for r in rows]


async def change_webhook_config(conn: asyncpg.Connection, webhook_id: int) -> Any:
    """The kept configuration of one change webhook (None if it has none)."""
    return await conn.fetchval(
        "select config from importer.change_webhooks where webhook_id = $1", webhook_id
    )


async def keep_change_webhook(conn: asyncpg.Connection, webhook_id: int, config: Any) -> None:
    await conn.execute(
        """
        insert into importer.change_webhooks (webhook_id, config) values ($1, $2)
        on conflict (webhook_id) do update set config = excluded.config
        """,
        webhook_id,
        config,
    )


async def forget_change_webhook(conn: asyncpg.Connection, webhook_id: int) -> None:
    await conn.execute("delete from importer.change_webhooks where webhook_id = $1", webhook_id)


async def claim_change_requests(
    conn: asyncpg.Connection,
    claims: Sequence[tuple[int, str, datetime]],
    *,
    now: datetime,
) -> dict[tuple[int, str], int]:
    """Claim each (webhook id, batch id, batch time) in one statement, with a new delivery
    id; returns (webhook id, batch id) → delivery id for the claims won. One lost was
    claimed before (a replay, another replica): the primary key never grants it twice."""
    rows = await conn.fetch(
        """
        insert into importer.change_requests
            (webhook_id, batch_id, batch_at, delivery_id, requested_at)
        select w, b, t, nextval('eventstore.delivery_ids'), $3
        from unnest($1::bigint[], $2::uuid[], $4::timestamptz[]) as x(w, b, t)
        on conflict (webhook_id, batch_id, batch_at) do nothing
        returning webhook_id, batch_id::text as batch_id, delivery_id
        """,
        [webhook_id for webhook_id, _, _ in claims],
        [batch_id for _, batch_id, _ in claims],
        now,
        [batch_at for _, _, batch_at in claims],
    )
    return {(r["webhook_id"], r["batch_id"]): r["delivery_id"] for r in rows}
