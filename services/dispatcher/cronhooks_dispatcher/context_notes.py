"""A cron webhook's `attachNotes` (CONTRACT §13): the notes an attempt carries as
`context_notes`, read when the attempt is sent (a retry sends them as they are then).

A note is attached when its path matches one of the webhook's `attach_notes` globs and one
of its `read_patterns` (what its api_token could read anyway), sorted by path in code point
order. The list is capped at `MAX_CONTEXT_BYTES`: each note counts the UTF-8 bytes of its
path, content and content_hash; whole notes are taken in path order until the next one
would pass the cap, and the rest is left out with `truncated`. No note is cut: a reader
gets each attached note whole or not at all.

The notes come from `shared.context_notes`, the importer's view of its visible notes (the
dispatcher imports no other service). A herd of deliveries asks once per event-loop
iteration: a DataLoader gathers the attempts' (attach, read) pattern pairs into one query,
which filters, sorts and sums in the database, so notes past the cap never leave it.
Webhooks without attachNotes never reach this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypedDict

import asyncpg
from aiodataloader import DataLoader

from cronhooks_common.events import Target
from cronhooks_common.globs import glob_to_regex
from cronhooks_dispatcher import queries

MAX_CONTEXT_BYTES = 1 << 20  # 1 MiB

# (attach_notes, read_patterns) of one attempt: the loader's key.
Patterns = tuple[tuple[str, ...], tuple[str, ...]]


class ContextNote(TypedDict):
    """One attached note as the body's `context_notes` carries it (CONTRACT §13)."""

    path: str
    content: str
    content_hash: str


class ContextRow(TypedDict):
    """A row of `queries.CONTEXT_NOTES` (an asyncpg Record in the service)."""

    path: str
    content: str
    content_hash: str
    fits: bool  # within the cap


class ContextNotes(NamedTuple):
    notes: list[ContextNote]  # by path
    truncated: bool  # a note that matched was left out by the cap


def key_of(target: Target) -> Patterns | None:
    """The loader key of a delivery's target; None when it attaches nothing."""
    attach = target.attach_notes
    if not attach:
        return None
    return tuple(attach), tuple(target.read_patterns or ())


def _spec(key: Patterns) -> dict[str, list[str]]:
    attach, read = key
    return {"attach": [glob_to_regex(p) for p in attach], "read": [glob_to_regex(p) for p in read]}


def context_from_rows(rows: Sequence[asyncpg.Record | ContextRow]) -> ContextNotes:
    """One key's rows of `queries.CONTEXT_NOTES` (in path order): the notes that fit, and
    whether one did not. Only the first note that does not fit can come back, and it ends
    the list."""
    notes: list[ContextNote] = [
        {"path": r["path"], "content": r["content"], "content_hash": r["content_hash"]}
        for r in rows
        if r["fits"]
    ]
    return ContextNotes(notes, truncated=len(notes) < len(rows))


class ContextNoteLoader(DataLoader[Patterns, ContextNotes]):
    def __init__(self, pool: asyncpg.Pool, cap: int = MAX_CONTEXT_BYTES) -> None:
        # No cache: notes are read at send time, each attempt sees them as they are then.
        super().__init__(cache=False, max_batch_size=200)
        self._pool = pool
        self._cap = cap

    async def batch_load_fn(self, keys: list[Patterns]) -> list[ContextNotes]:
        # A herd of one webhook's deliveries, or of webhooks configured alike, asks the
        # same question: ask it once (each answer can be a MiB).
        unique = list(dict.fromkeys(keys))
        # (the pool's jsonb codec encodes the list)
        rows = await self._pool.fetch(queries.CONTEXT_NOTES, [_spec(k) for k in unique], self._cap)
        found: list[list[asyncpg.Record]] = [[] for _ in unique]
        for row in rows:
            found[row["i"] - 1].append(row)
        answers = {key: context_from_rows(rows) for key, rows in zip(unique, found, strict=True)}
        return [answers[key] for key in keys]
