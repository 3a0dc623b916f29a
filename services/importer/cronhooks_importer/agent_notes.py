"""What an agent can do with notes (CONTRACT §5): the one code path behind the REST routes
(api.py) and the agent GraphQL API (agent_graphql.py).

Reads show only what the caller may read. Writes — push, commit of staged updates, hide —
pass the same batch rules (rules.py: a path once, 1,000 changes, 2 MiB, the caller's write
patterns as they are when the batch is applied, not when it was staged), go through
`apply_batch` (imports.py) at the caller's depth, all or nothing, and close with the
verdict event (`notes.imported` / `notes.rejected`) on a `push-{uuid}` stream.
`pushNotes(skipCommit: true)` stages updates instead, durably (importer.staged_changes),
owned by the token and expiring with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.events import Causation
from cronhooks_common.globs import glob_to_regex, like_prefix
from cronhooks_common.refusals import log_refused
from cronhooks_importer.callers import Caller
from cronhooks_importer.imports import BATCHES, apply_batch, too_deep, verdict
from cronhooks_importer.rules import (
    Change,
    ChangeError,
    batch_limits,
    check_batch,
    content_hash,
    parse_changes,
    parse_removals,
)
from cronhooks_importer.store import Applied

MAX_LISTED = 10_000


@dataclass(frozen=True, slots=True)
class WriteResult:
    applied: list[Applied] = field(default_factory=list)
    errors: list[ChangeError] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)  # path → stable id


@dataclass(frozen=True, slots=True)
class AgentNotes:
    pool: asyncpg.Pool
    clock: Clock

    # --- reads ---------------------------------------------------------------------------

    async def readable(self, caller: Caller, pattern: str) -> list[asyncpg.Record]:
        """Notes matching `pattern` that the caller may read, by path (at most 10,000).
        Filtered in SQL: the prefix narrows by index, the globs become regexes, so rows
        the caller may not read never leave the database."""
        # one condition per set of read patterns: a path must match one pattern of each
        sets = [[glob_to_regex(p) for p in patterns] for patterns in caller.read_patterns]
        readable = "".join(f" and path ~ any(${n + 4}::text[])" for n in range(len(sets)))
        rows: list[asyncpg.Record] = await self.pool.fetch(
            "select path, content_hash, version, updated_at from importer.notes"
            f" where path like $1 and path ~ $2 and not removed{readable}"
            " order by path limit $3",
            like_prefix(pattern),
            glob_to_regex(pattern),
            MAX_LISTED,
            *sets,
        )
        return rows

    async def get(self, path: str) -> asyncpg.Record | None:
        """The note at `path` (the caller's read patterns are checked by the route)."""
        return await self.pool.fetchrow(
            "select path, content, content_hash, version, depth, updated_at from importer.notes"
            " where path = $1 and not removed",
            path,
        )

    # --- writes --------------------------------------------------------------------------

    async def push(self, caller: Caller, raw: Any) -> WriteResult:
        """Write a batch of {path, content, expected_hash} at once."""
        changes, errors = parse_changes(raw, may_write=caller.may_write)
        async with self.pool.acquire() as conn, conn.transaction():
            return await self._apply(conn, caller, changes, errors, operation="push")

    async def hide(self, caller: Caller, raw: Any) -> WriteResult:
        """Remove (hide) a batch of [{path, expected_hash?}]."""
        changes, errors = parse_removals(raw, may_write=caller.may_write)
        async with self.pool.acquire() as conn, conn.transaction():
            return await self._apply(conn, caller, changes, errors, operation="hide")

    async def stage(self, caller: Caller, raw: Any) -> WriteResult:
        """Check a batch and keep it for `commit`; a path staged again replaces its update.
        Hash conflicts are decided at commit, against the notes as they are then."""
        changes, errors = parse_changes(raw, may_write=caller.may_write)
        errors = errors or too_deep(caller.depth, caller.max_depth)
        if errors:
            _log_refused("stage", caller, errors)
            return WriteResult(errors=errors)
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            await self._forget_expired(conn, now)
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
                caller.stage_owner,
                [c.path for c in changes],
                [c.content for c in changes],
                [c.expected_hash for c in changes],
                now,
                caller.expires_at,
            )
            ids = await note_ids(conn, [c.path for c in changes])
        staged = [Applied(c.path, content_hash(c.content or ""), 0, "staged") for c in changes]
        return WriteResult(applied=staged, ids=ids)

    async def commit(self, caller: Caller) -> WriteResult:
        """Apply everything the caller staged as one batch, under the rules of every batch
        (CONTRACT §15): the caller's write patterns as they are now, at most 1,000 changes
        and 2 MiB. Rejected, it writes nothing and the staged updates stay as they are."""
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            await self._forget_expired(conn, now)
            # The bounds first, from the sizes alone: an oversized stage is never loaded.
            staged = await conn.fetchrow(
                "select count(*) as changes, coalesce(sum(octet_length(content)), 0) as size"
                " from importer.staged_changes where owner = $1",
                caller.stage_owner,
            )
            if staged["changes"] == 0:
                return WriteResult()
            changes: list[Change] = []
            errors = batch_limits(staged["changes"], staged["size"])
            if not errors:
                rows = await conn.fetch(
                    "select path, content, expected_hash from importer.staged_changes"
                    " where owner = $1 order by path for update",
                    caller.stage_owner,
                )
                changes = [Change(r["path"], r["content"], r["expected_hash"]) for r in rows]
                errors = check_batch(changes, may_write=caller.may_write)
            result = await self._apply(conn, caller, changes, errors, operation="commit")
            if not result.errors:
                # What was committed, not what was staged since (by the same credential).
                await conn.execute(
                    "delete from importer.staged_changes where owner = $1 and path = any($2)",
                    caller.stage_owner,
                    [c.path for c in changes],
                )
            return result

    async def _apply(
        self,
        conn: asyncpg.Connection,
        caller: Caller,
        changes: list[Change],
        errors: list[ChangeError],
        *,
        operation: str,
    ) -> WriteResult:
        now = self.clock.now()
        causation = Causation.new(actor=caller.subject)
        applied, errors = await apply_batch(
            conn,
            changes,
            errors,
            depth=caller.depth,
            max_depth=caller.max_depth,
            writer=caller.writer,
            causation=causation,
            now=now,
            skip_webhooks=caller.skip_webhooks,
        )
        common = {
            "delivery_id": caller.delivery_id,
            "writer": caller.writer,
            "depth": caller.depth,
            "source": "api_key" if caller.label is not None else "token",
            "operation": operation,
        }
        await eventstore.append(
            conn,
            f"push-{uuid.uuid4()}",
            [verdict(common, applied, errors)],
            expected_version=0,
            causation=causation,
            occurred_at=now,
        )
        BATCHES.labels("token", "rejected" if errors else "imported").inc()
        if errors:
            _log_refused(operation, caller, errors)
        ids = {} if errors else await note_ids(conn, [a.path for a in applied])
        return WriteResult(applied=applied, errors=errors, ids=ids)

    @staticmethod
    async def _forget_expired(conn: asyncpg.Connection, now: datetime) -> None:
        await conn.execute(
            "delete from importer.staged_changes where expires_at is not null and expires_at <= $1",
            now,
        )


def _log_refused(operation: str, caller: Caller, errors: Sequence[ChangeError]) -> None:
    """One line for a refused batch, however many changes it refused: the first one's."""
    first = errors[0]
    log_refused(
        "notes_refused",
        field=first.field,
        reason=first.to_json()["error"],
        path=first.to_json()["path"] or None,
        operation=operation,
        writer=caller.subject,
        errors=len(errors),
    )


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
