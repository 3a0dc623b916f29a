"""replayDeliveries (CONTRACT §12, Svix's "recover failed since"): one new MANUAL delivery
for each failed delivery of a webhook whose createdAt is in [since, until), oldest first.

A replay is what triggerCronWebhook requests (attempt 1, trigger manual, the webhook's
*current* target: the admin has usually just fixed the URL), plus `replay_of`. A change
delivery's replay re-sends what the failed one carried — the same changes at the same
depth, as a retry does (scheduler/firing.py) — not the notes as they are now: the agent
gets the events it missed, and the depth guard still ends the chain.

The failed deliveries come from the read model (admin.deliveries); the changes from the
first `delivery.requested` of each, in the event store. One call replays at most
MAX_REPLAYED: a wider window is refused, naming `until`, and requests nothing. Replaying
only the oldest part instead would look done, and calling again with the same window
would replay that part twice (the originals stay failed).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_admin.manual import manual_request
from cronhooks_admin.validation import InputError
from cronhooks_common.events import CHANGE, EventType, NewEvent, delivery_stream
from cronhooks_common.webhooks import WebhookState

MAX_REPLAYED = 1000


def check_window(since: datetime, until: datetime | None) -> None:
    if until is not None and until <= since:
        raise InputError("until", "must be later than since")


async def failed_deliveries(
    conn: asyncpg.Connection, webhook_id: int, since: datetime, until: datetime | None
) -> list[int]:
    """Ids of the webhook's failed deliveries created in [since, until), oldest first."""
    rows = await conn.fetch(
        """
        select id from admin.deliveries
        where cron_webhook_id = $1 and status = 'failed'
          and created_at >= $2 and ($3::timestamptz is null or created_at < $3)
        order by created_at, id
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


def replay_request(
    state: WebhookState, webhook_id: int, delivery_id: int, original: int, first: dict[str, Any]
) -> NewEvent:
    """The `delivery.requested` of the replay of delivery `original` (`first`: its first
    request, needed for a change delivery only)."""
    if state.kind == CHANGE:
        return manual_request(
            state,
            webhook_id,
            delivery_id,
            replay_of=original,
            depth=int(first.get("depth", 0)),
            changes=first.get("changes", []),
        )
    return manual_request(state, webhook_id, delivery_id, replay_of=original)
