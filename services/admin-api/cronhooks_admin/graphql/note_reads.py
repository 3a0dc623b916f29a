"""How much note content one admin GraphQL request may read (CONTRACT §15): 16 MiB in all,
over every `notes` (and `note`) field and alias that selects `content`; a request that
would read more is refused whole (`data` null, QUERY_TOO_COMPLEX naming 16 MiB).

Decided before any content is loaded: each such field first asks this per-request budget,
with its own arguments, how much content it would return — the sum of
`octet_length(content)` over the rows its query would select (Postgres reads a stored
value's length from its header, not the value). The fields are root fields of the query,
which graphql-core starts together, so a DataLoader gathers all of them into one
statement and one decision: 60 aliases of `notes(limit: 500) { content }` cost one query
of sizes and no content, where they used to build a 210 MB answer. A request whose fields
were somehow asked in several rounds is still refused whole once its total passes the
bound (http/graphql_route.py answers the refusal alone), having read only what came before.
"""

from __future__ import annotations

import glob
from typing import TYPE_CHECKING, Any

import asyncpg
import structlog
from aiodataloader import DataLoader
from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLResolveInfo,
    InlineFragmentNode,
    SelectionSetNode,
)

from cronhooks_admin.graphql import queries as sql
from cronhooks_common.globs import glob_to_regex, like_prefix
from cronhooks_common.graphql_limits import too_complex

if TYPE_CHECKING:  # the context holds this module's budget
    from cronhooks_admin.graphql.context import Context

log = structlog.get_logger(__name__)

MAX_NOTE_READ_BYTES = 16 << 20  # 16 MiB

# (LIKE prefix, regex, limit): the rows one field's query selects, as queries.NOTES
# selects them.
Reads = tuple[str, str, int]


def refusal() -> GraphQLError:
    return too_complex(
        f"the request asks for more than {MAX_NOTE_READ_BYTES >> 20} MiB of note content in all"
    )


def of_pattern(pattern: str, limit: int) -> Reads:
    """What `notes(pattern, limit)` reads."""
    return like_prefix(pattern), glob_to_regex(pattern), limit


def of_path(path: str) -> Reads:
    """What `note(path)` reads: the one note at `path` (its glob characters escaped)."""
    return of_pattern(glob.escape(path), 1)


def selects_content(info: GraphQLResolveInfo[Any]) -> bool:
    """Whether this field's selection asks for `content`, directly or in a fragment
    (`@skip`/`@include` are not looked at: a field that may be skipped still counts)."""
    seen: set[str] = set()

    def walk(selection_set: SelectionSetNode | None) -> bool:
        for selection in selection_set.selections if selection_set else ():
            if isinstance(selection, FieldNode):
                if selection.name.value == "content":
                    return True
            elif isinstance(selection, InlineFragmentNode):
                if walk(selection.selection_set):
                    return True
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = info.fragments.get(name)
                if name not in seen and fragment is not None:
                    seen.add(name)
                    if walk(fragment.selection_set):
                        return True
        return False

    return any(walk(node.selection_set) for node in info.field_nodes)


class NoteReads(DataLoader[Reads, bool]):
    """One request's budget. `load(reads)` answers whether that field may read its
    content; once the request's total passes the bound, `refused` is set."""

    def __init__(self, pool: asyncpg.Pool, limit: int = MAX_NOTE_READ_BYTES) -> None:
        # No cache: every field and alias counts, also one asking what another asked.
        super().__init__(cache=False)
        self._pool = pool
        self._limit = limit
        self.spent = 0
        self.refused = False

    async def charge(self, reads: Reads) -> None:
        """Return once the field may read its content; QUERY_TOO_COMPLEX if not."""
        if not await self.load(reads):
            raise refusal()

    async def batch_load_fn(self, keys: list[Reads]) -> list[bool]:
        unique = list(dict.fromkeys(keys))
        rows = await self._pool.fetch(
            sql.NOTE_SIZES, [k[0] for k in unique], [k[1] for k in unique], [k[2] for k in unique]
        )
        sizes = {unique[r["i"] - 1]: int(r["bytes"]) for r in rows}
        self.spent += sum(sizes[k] for k in keys)
        if self.spent > self._limit and not self.refused:
            self.refused = True
            log.warning("notes_read_refused", bytes=self.spent, fields=len(keys))
        return [not self.refused] * len(keys)


async def charge(info: GraphQLResolveInfo[Context], reads: Reads) -> None:
    """Charge the request's budget for a `note`/`notes` field that selects content (one
    that does not reads none); QUERY_TOO_COMPLEX past the bound."""
    if selects_content(info):
        await info.context.note_reads.charge(reads)
