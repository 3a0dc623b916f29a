"""The one write path of notes: a batch applied all or nothing, and the verdict closing it.

Every write — an agent's answer (answers.py), a push, a commit of staged updates, a hide
(agent_notes.py) — is checked by the batch rules (rules.py) and the depth guard, then
applied by `apply_batch` (store.py, in a savepoint: all or nothing). Its verdict is
`notes.imported` with what was applied or `notes.rejected` with one error per offending
change, saying which attempt or push the import closes (`ImportFields`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg
import msgspec
from prometheus_client import Counter

from cronhooks_common.events import Causation, ImportFields, NotesImported, NotesRejected
from cronhooks_common.traces import Origin
from cronhooks_importer.rules import FORBIDDEN, Change, ChangeError, allowed_by, parse_changes
from cronhooks_importer.store import Applied, Rejected, apply_changes

BATCHES = Counter("cronhooks_importer_batches_total", "Change batches", ["source", "outcome"])


async def import_changes(
    conn: asyncpg.Connection,
    raw: object,
    *,
    write_patterns: Sequence[str],
    depth: int,
    max_depth: int | None,
    writer: str,
    causation: Causation,
    now: datetime,
    origin: Origin | None = None,
) -> tuple[list[Applied], list[ChangeError]]:
    """Check and apply a batch of writes as received (JSON) — an agent's answer or a push."""
    changes, errors = parse_changes(raw, may_write=allowed_by(write_patterns))
    return await apply_batch(
        conn,
        changes,
        errors,
        depth=depth,
        max_depth=max_depth,
        writer=writer,
        causation=causation,
        now=now,
        origin=origin,
    )


def too_deep(depth: int, max_depth: int | None) -> list[ChangeError]:
    """The depth guard: a write deeper than the webhook's maxDepth is refused."""
    if max_depth is not None and depth > max_depth:
        return [
            ChangeError("", f"depth {depth} exceeds the webhook's maxDepth {max_depth}", FORBIDDEN)
        ]
    return []


async def apply_batch(
    conn: asyncpg.Connection,
    changes: list[Change],
    errors: list[ChangeError],
    *,
    depth: int,
    max_depth: int | None,
    writer: str,
    causation: Causation,
    now: datetime,
    skip_webhooks: bool = False,
    origin: Origin | None = None,
) -> tuple[list[Applied], list[ChangeError]]:
    """The one way notes are written: a parsed batch (writes and removals) applied all or
    nothing in a savepoint, at `depth`; (applied, []) or ([], errors)."""
    # (skip_webhooks: the batch was written with a skipWebhooks API key; origin: who wrote
    # it, as its note versions record (§16.3))
    errors = errors or too_deep(depth, max_depth)
    if errors:
        return [], errors
    if not changes:
        return [], []
    try:
        async with conn.transaction():
            applied = await apply_changes(
                conn,
                changes,
                depth=depth,
                writer=writer,
                causation=causation,
                now=now,
                skip_webhooks=skip_webhooks,
                origin=origin,
            )
    except Rejected as rejected:
        return [], rejected.errors
    return applied, []


def verdict(
    closes: ImportFields, applied: list[Applied], errors: list[ChangeError]
) -> NotesImported | NotesRejected:
    """`notes.imported` with what was applied, or `notes.rejected` with why: the event that
    closes an import (which one: `closes`), from a synchronous answer or a push alike.
    A no-op write made no version, so it is not listed (CONTRACT §16.1)."""
    fields = msgspec.structs.asdict(closes)  # what is UNSET there stays left out
    if errors:
        return NotesRejected(**fields, errors=[e.refused for e in errors])
    return NotesImported(**fields, applied=[a.change for a in applied if a.changed])
