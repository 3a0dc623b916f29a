"""replayDeliveries (CONTRACT §12, Svix's "recover failed since"): one new MANUAL delivery
for each failed delivery of a webhook whose createdAt is in [since, until), oldest first.
A delivery whose run (§16.2) ended FAILED or TIMED_OUT counts as failed; one whose run
succeeded or still runs does not.

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

import asyncpg

from cronhooks_admin.commands import change_notes
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.change_notes import Wanted
from cronhooks_admin.commands.manual import manual_request
from cronhooks_admin.errors import InputError
from cronhooks_common.events import CHANGE, UNSET, DeliveryRequested, decode, delivery_stream
from cronhooks_common.webhooks import WebhookState

MAX_REPLAYED = 1000


def check_window(since: datetime, until: datetime | None) -> None:
    if until is not None and until <= since:
        raise InputError("until", "must be later than since")


async def take_turn(conn: asyncpg.Connection, webhook_id: int) -> None:
    """Wait for another replay of the webhook to commit (then its replays are seen)."""
    await conn.execute(sql.REPLAY_TURN, webhook_id)


async def failed_deliveries(
    conn: asyncpg.Connection, webhook_id: int, since: datetime, until: datetime | None
) -> list[int]:
    """Ids of the webhook's failed deliveries created in [since, until) that are not
    replays and were not replayed yet, oldest first."""
    # one more tells that the window holds too many
    rows = await conn.fetch(sql.FAILED_DELIVERIES, webhook_id, since, until, MAX_REPLAYED + 1)
    if len(rows) > MAX_REPLAYED:
        raise InputError(
            "until",
            f"the window holds more than {MAX_REPLAYED} failed deliveries, more than one call"
            " replays; replay it in parts (an earlier until, then the rest)",
        )
    return [r["id"] for r in rows]


async def first_requests(conn: asyncpg.Connection, ids: list[int]) -> dict[int, DeliveryRequested]:
    """The first `delivery.requested` of each delivery (version 1 of its stream)."""
    rows = await conn.fetch(
        sql.FIRST_EVENTS, [delivery_stream(i) for i in ids], DeliveryRequested.TYPE
    )
    firsts = [decode(DeliveryRequested.TYPE, r["data"], r["schema_version"]) for r in rows]
    return {p.delivery_id: p for p in firsts if isinstance(p, DeliveryRequested)}


def _wanted(first: DeliveryRequested | None) -> list[Wanted]:
    """The changes a change delivery carried: the paths and events its replay carries."""
    if first is None or first.changes is UNSET:
        return []
    return [Wanted(c.path, c.event, c.version) for c in first.changes]


def _depth(first: DeliveryRequested | None) -> int:
    return 0 if first is None or first.depth is UNSET else first.depth


async def replay_requests(
    conn: asyncpg.Connection,
    state: WebhookState,
    webhook_id: int,
    ids: list[int],
    failed: list[int],
) -> list[DeliveryRequested]:
    """The `delivery.requested` of each replay: `ids[k]` replays `failed[k]`."""
    if state.kind != CHANGE:
        return [
            manual_request(state, webhook_id, new_id, replay_of=old)
            for new_id, old in zip(ids, failed, strict=True)
        ]
    firsts = await first_requests(conn, failed)
    wanted = [_wanted(firsts.get(old)) for old in failed]
    notes = await change_notes.notes_now(conn, state.config, wanted)
    return [
        manual_request(
            state,
            webhook_id,
            new_id,
            replay_of=old,
            depth=_depth(firsts.get(old)),
            payload=change_notes.payload_now(state.config, changes, now),
        )
        for new_id, old, changes, now in zip(ids, failed, wanted, notes, strict=True)
    ]
