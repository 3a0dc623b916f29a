"""Step 2: what an agent can do with notes (CONTRACT §5), the one code path behind the
REST routes (api.py) and the agent GraphQL API (agent_graphql.py).

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
from typing import Any, Literal

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.events import Causation, ImportFields, NewEvent
from cronhooks_common.globs import glob_to_regex, like_prefix
from cronhooks_common.refusals import log_refused
from cronhooks_importer import queries
from cronhooks_importer.callers import Caller
from cronhooks_importer.imports import BATCHES, apply_batch, too_deep, verdict
from cronhooks_importer.rules import (
    CONTENT_NOT_STRING,
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

Operation = Literal["push", "commit", "hide"]  # as the verdict names it


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
        return await queries.readable_notes(
            self.pool,
            prefix=like_prefix(pattern),
            regex=glob_to_regex(pattern),
            limit=MAX_LISTED,
            pattern_sets=sets,
        )

    async def get(self, path: str) -> asyncpg.Record | None:
        """The note at `path` (the caller's read patterns are checked by the route)."""
        return await queries.visible_note(self.pool, path)

    # --- writes --------------------------------------------------------------------------

    async def push(
        self, caller: Caller, raw: Any, *, no_content: str = CONTENT_NOT_STRING
    ) -> WriteResult:
        """Write a batch of {kind, path, content, expected_hash, find, replace} at once
        (`no_content`: the error of a write without content)."""
        changes, errors = parse_changes(raw, may_write=caller.may_write, no_content=no_content)
        async with self.pool.acquire() as conn, conn.transaction():
            return await self._apply(conn, caller, changes, errors, operation="push")

    async def hide(self, caller: Caller, raw: Any) -> WriteResult:
        """Remove (hide) a batch of [{path, expected_hash?}]."""
        changes, errors = parse_removals(raw, may_write=caller.may_write)
        async with self.pool.acquire() as conn, conn.transaction():
            return await self._apply(conn, caller, changes, errors, operation="hide")

    async def stage(
        self, caller: Caller, raw: Any, *, no_content: str = CONTENT_NOT_STRING
    ) -> WriteResult:
        """Check a batch and keep it for `commit`; a path staged again replaces its update.
        Hash conflicts and patches are decided at commit, against the notes as they are
        then."""
        changes, errors = parse_changes(raw, may_write=caller.may_write, no_content=no_content)
        errors = errors or too_deep(caller.depth, caller.max_depth)
        if errors:
            _log_refused("stage", caller, errors)
            return WriteResult(errors=errors)
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            await queries.forget_expired_stages(conn, now)
            await queries.stage_changes(
                conn, caller.stage_owner, changes, now=now, expires_at=caller.expires_at
            )
            ids = await queries.note_ids(conn, [c.path for c in changes])
        # A staged patch has no content hash yet: it depends on the note at commit.
        staged = [
            Applied(c.path, "" if c.content is None else content_hash(c.content), 0, "staged")
            for c in changes
        ]
        return WriteResult(applied=staged, ids=ids)

    async def commit(self, caller: Caller) -> WriteResult:
        """Apply everything the caller staged as one batch, under the rules of every batch
        (CONTRACT §15): the caller's write patterns as they are now, at most 1,000 changes
        and 2 MiB. Rejected, it writes nothing and the staged updates stay as they are."""
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            await queries.forget_expired_stages(conn, now)
            # The bounds first, from the sizes alone: an oversized stage is never loaded.
            count, size = await queries.staged_size(conn, caller.stage_owner)
            if count == 0:
                return WriteResult()
            changes: list[Change] = []
            errors = batch_limits(count, size)
            if not errors:
                changes = await queries.staged_changes(conn, caller.stage_owner)
                errors = check_batch(changes, may_write=caller.may_write)
            result = await self._apply(conn, caller, changes, errors, operation="commit")
            if not result.errors:
                # What was committed, not what was staged since (by the same credential).
                await queries.unstage(conn, caller.stage_owner, [c.path for c in changes])
            return result

    async def _apply(
        self,
        conn: asyncpg.Connection,
        caller: Caller,
        changes: list[Change],
        errors: list[ChangeError],
        *,
        operation: Operation,
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
            origin=caller.origin,
        )
        await eventstore.append(
            conn,
            f"push-{uuid.uuid4()}",
            [NewEvent.of(verdict(push_of(caller, operation), applied, errors))],
            expected_version=0,
            causation=causation,
            occurred_at=now,
        )
        BATCHES.labels("token", "rejected" if errors else "imported").inc()
        if errors:
            _log_refused(operation, caller, errors)
        ids = {} if errors else await queries.note_ids(conn, [a.path for a in applied])
        return WriteResult(applied=applied, errors=errors, ids=ids)


def push_of(caller: Caller, operation: Operation) -> ImportFields:
    """Which push a verdict closes: who wrote, at which depth, by which operation."""
    return ImportFields(
        delivery_id=caller.delivery_id,
        writer=caller.writer,
        depth=caller.depth,
        source="api_key" if caller.label is not None else "token",
        operation=operation,
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
