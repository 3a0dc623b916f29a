"""The notes of change deliveries an admin asks for — `triggerChangeWebhook` and the
replay of a change delivery (CONTRACT §11, §12) — as they are now, in the read model.

What each change shows is cronhooks_common.change_payload's to say (readPatterns,
includeContent, removals, the 1 MiB cap), as for the matcher's deliveries. The content is
read only where that function will show it: the sizes come first (`octet_length` reads a
stored value's length without fetching it), each delivery's running total is summed in
path order, and only notes that fit under the cap are read whole. A trigger of 1,000 notes
of 1 MiB reads 1 MiB of content, not 1 GB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from cronhooks_common.change_payload import (
    MAX_CHANGE_CONTENT_BYTES,
    ChangePayload,
    carries_content,
    change_payload,
)

# $1..$3: (delivery index, path, may show content) per wanted change; $4: the cap. One row
# per wanted change whose note exists (removed or not). `before` is the content of the
# delivery's earlier changes that may be shown, by path in code point order (collate "C",
# as Python sorts): a note is read whole only when `before + size` stays within the cap,
# exactly the changes change_payload carries.
_SQL = """
with wanted as (
    select * from unnest($1::int[], $2::text[], $3::bool[]) as w(i, path, shown)
),
found as (
    select w.i, n.path, n.version, n.removed,
           case when n.removed then null else n.content_hash end as content_hash,
           case when n.removed then null else octet_length(n.content) end as size,
           w.shown and not n.removed as counted
    from wanted w join admin.notes n on n.path = w.path
),
running as (
    select f.*,
           coalesce(sum(f.size) filter (where f.counted) over (
               partition by f.i order by f.path collate "C"
               rows between unbounded preceding and 1 preceding), 0) as before
    from found f
)
select r.i, r.path, r.version, r.removed, r.content_hash, r.size,
       case when r.counted and r.before + r.size <= $4 then n.content end as content
from running r join admin.notes n on n.path = r.path
"""


async def notes_now(
    conn: asyncpg.Connection,
    config: Mapping[str, Any],
    deliveries: Sequence[Sequence[Mapping[str, Any]]],
    *,
    cap: int = MAX_CHANGE_CONTENT_BYTES,
) -> list[dict[str, asyncpg.Record]]:
    """For each delivery's wanted changes (`path`, `event`), its notes as they are now, by
    path (a path with no note is absent): version, content_hash, size, removed, and the
    content where change_payload will show it (else null)."""
    index, paths, shown = [], [], []
    for i, changes in enumerate(deliveries):
        for change in changes:
            index.append(i)
            paths.append(str(change["path"]))
            shown.append(carries_content(config, change))
    found: list[dict[str, asyncpg.Record]] = [{} for _ in deliveries]
    if paths:
        for row in await conn.fetch(_SQL, index, paths, shown, cap):
            found[row["i"]][row["path"]] = row
    return found


def payload_now(
    config: Mapping[str, Any],
    changes: Sequence[Mapping[str, Any]],
    notes: Mapping[str, asyncpg.Record],
    *,
    cap: int = MAX_CHANGE_CONTENT_BYTES,
) -> ChangePayload:
    """The payload of `changes` (their paths and events) with the notes' current version,
    hash and content; a note that no longer exists shows neither hash nor content."""
    current: list[dict[str, Any]] = []
    for change in changes:
        note = notes.get(str(change["path"]))
        if note is None or note["removed"]:
            version = change.get("version", 0) if note is None else note["version"]
            current.append(
                {**_named(change), "version": version, "content_hash": None, "size": None}
            )
        else:
            current.append(
                {
                    **_named(change),
                    "version": note["version"],
                    "content_hash": note["content_hash"],
                    "size": note["size"],
                    "content": note["content"],
                }
            )
    return change_payload(config, current, cap=cap)


def _named(change: Mapping[str, Any]) -> dict[str, Any]:
    return {"path": change["path"], "event": change["event"]}
