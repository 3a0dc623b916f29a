"""Notes (CONTRACT §8): reads from the read model, within the request's content budget
(note_reads.py); writes forwarded to the importer (the command side's note_writes.py)."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql import note_reads
from cronhooks_admin.graphql import queries as sql
from cronhooks_admin.graphql.bindables import (
    commit_notes_result,
    hide_notes_result,
    mutation,
    push_notes_result,
    query,
)
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_common.globs import glob_to_regex, like_prefix, pattern_problem
from cronhooks_common.graphql_support import bad_input
from cronhooks_common.note_inputs import HideNotesInput, PushNotesInput
from cronhooks_common.paths import path_problem

Info = GraphQLResolveInfo[Context]
MAX_LIMIT = 500


@query.field("note")
async def resolve_note(_: Any, info: Info, path: str) -> GraphQLObject | None:
    problem = path_problem(path)
    if problem is not None:
        raise bad_input("path", problem)
    await note_reads.charge(info, note_reads.of_path(path))
    row = await info.context.pool.fetchrow(sql.NOTE, path)
    return None if row is None else dict(row)


@query.field("notes")
async def resolve_notes(
    _: Any, info: Info, pattern: str = "*", limit: int = 100
) -> list[GraphQLObject]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    problem = pattern_problem(pattern)
    if problem is not None:
        raise bad_input("pattern", problem)
    # 16 MiB of content per request in all (CONTRACT §15), decided before any is read.
    await note_reads.charge(info, note_reads.of_pattern(pattern, limit))
    rows = await info.context.pool.fetch(
        sql.NOTES, like_prefix(pattern), glob_to_regex(pattern), limit
    )
    return [dict(r) for r in rows]


@mutation.field("pushNotes")
async def resolve_push_notes(_: Any, info: Info, input: PushNotesInput) -> GraphQLObject:
    return await info.context.note_writes.push(info.context.admin, input)


@mutation.field("commitNotes")
async def resolve_commit_notes(_: Any, info: Info) -> GraphQLObject:
    return await info.context.note_writes.commit(info.context.admin)


@mutation.field("hideNotes")
async def resolve_hide_notes(_: Any, info: Info, input: HideNotesInput) -> GraphQLObject:
    return await info.context.note_writes.hide(info.context.admin, input)


@push_notes_result.type_resolver
@commit_notes_result.type_resolver
@hide_notes_result.type_resolver
def resolve_note_write_type(result: dict[str, object], *_: object) -> object:
    return result["__typename"]  # as the importer answered it
