"""replayDeliveries (CONTRACT §12, Svix's "recover failed since"): one new MANUAL delivery
for each failed delivery of a webhook whose createdAt is in [since, until), oldest first.

A replay is what triggerCronWebhook requests (attempt 1, trigger manual, the webhook's
*current* target: the admin has usually just fixed the URL), plus `replay_of`. A change
delivery's replay carries the same paths and events at the same depth as the failed one
(the depth guard still ends the chain), but built as now (revision 3): each note's current
version, hash and content, shown as the webhook's current includeContent and readPatterns
allow, under the 1 MiB cap (change_notes.py, cronhooks_common.change_payload). Resending
the old content would show the new URL what the narrowed webhook no longer allows.

Each failed delivery is replayed once, and a replay never: the window's failed deliveries
leave out those that are replays (`replay_of`) and those a replay already points at, both
from the read model (admin.deliveries.replay_of). Otherwise replaying one window again
re-sent the originals (still failed) and the replays that failed too — 17, 34, 68 … POSTs.
Two replays of one webhook take turns (a lock per webhook, held to the commit), so the
second sees the first's replays.

The failed deliveries come from the read model (admin.deliveries); the paths of a change
delivery from its first `delivery.requested`, in the event store. One call replays at most
MAX_REPLAYED: a wider window is refused, naming `until`, and requests nothing. Replaying
only the oldest part instead would look done, though what is left would still be there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_admin import change_notes
from cronhooks_admin.manual import manual_request
from cronhooks_admin.validation import InputError
from cronhooks_common.events import CHANGE, EventType, NewEvent, delivery_stream
from cronhooks_common.webhooks import WebhookState

MAX_REPLAYED = 1000


def check_window(since: datetime, until: datetime | None) -> None:
    if until is not None and until <= since:
        raise InputError("until", "must be later than since")


async def take_turn(conn: asyncpg.Connection, webhook_id: int) -> None:
    """Wait for another replay of the webhook to commit (then its replays are seen)."""
    await conn.execute(
        "select pg_advisory_xact_lock(hashtextextended('replay ' || $1::bigint::text, 0))",
        webhook_id,
    )


async def failed_deliveries(
    conn: asyncpg.Connection, webhook_id: int, since: datetime, until: datetime | None
) -> list[int]:
    """Ids of the webhook's failed deliveries created in [since, until) that are not
    replays and were not replayed yet, oldest first."""
    rows = await conn.fetch(
        """
        select d.id from admin.deliveries d
        where d.cron_webhook_id = $1 and d.status = 'failed' and d.replay_of is null
          and d.created_at >= $2 and ($3::timestamptz is null or d.created_at < $3)
          and not exists (select 1 from admin.deliveries r where r.replay_of = d.id)
        order by d.created_at, d.id
        limit $4
        """,
        webhook_id,
        since,
        until,
        MAX_REPLAYED + 1,  # one more tells that the window holds too many
    )
    if len(rows) > MAX_REPLAYED:
        raise InputError(
            "until",
            f"the window holds more than {MAX_REPLAYED} failed deliveries, more than one call"
            " replays; replay it in parts (an earlier until, then the rest)",
        )
    return [r["id"] for r in rows]


async def first_requests(conn: asyncpg.Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    """The first `delivery.requested` of each delivery (version 1 of its stream)."""
    rows = await conn.fetch(
        "select data from eventstore.events where stream = any($1::text[]) and version = 1"
        " and type = $2",
        [delivery_stream(i) for i in ids],
        EventType.DELIVERY_REQUESTED,
    )
    return {r["data"]["delivery_id"]: r["data"] for r in rows}


async def replay_requests(
    conn: asyncpg.Connection,
    state: WebhookState,
    webhook_id: int,
    ids: list[int],
    failed: list[int],
) -> list[NewEvent]:
    """The `delivery.requested` of each replay: `ids[k]` replays `failed[k]`."""
    if state.kind != CHANGE:
        return [
            manual_request(state, webhook_id, new_id, replay_of=old)
            for new_id, old in zip(ids, failed, strict=True)
        ]
    firsts = await first_requests(conn, failed)
    wanted = [firsts.get(old, {}).get("changes", []) for old in failed]
    notes = await change_notes.notes_now(conn, state.config, wanted)
    return [
        manual_request(
            state,
            webhook_id,
            new_id,
            replay_of=old,
            depth=int(firsts.get(old, {}).get("depth", 0)),
            **change_notes.payload_now(state.config, changes, now).request_fields(),
        )
        for new_id, old, changes, now in zip(ids, failed, wanted, notes, strict=True)
    ]
