"""A service's inbox: one row per event it has handled, so a redelivery has no second effect.

The row is written in the transaction of the effect it records, so both commit or
neither does: a message redelivered after a crash or a broker reconnect finds its row and
is skipped. The transactional consumer claims a whole batch in one statement; free
handlers (the dispatcher) claim their own, next to their lookups.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import asyncpg

from cronhooks_common.buckets import delivery_of
from cronhooks_common.events import Event


async def claim_event(conn: asyncpg.Connection, inbox: str, event: Event) -> bool:
    """Record `event` in the `inbox` table; False if it was handled before.

    Call inside the transaction of the effect: both commit together or neither does.
    Inboxes are partitioned by the delivery bucket of the event's stream (retention).
    """
    return bool(await claim_events(conn, inbox, [event]))


async def claim_events(conn: asyncpg.Connection, inbox: str, events: Sequence[Event]) -> set[UUID]:
    """The batch form of `claim_event`, in one statement: the ids not handled before."""
    rows = await conn.fetch(
        f"insert into {inbox} (event_id, delivery_id)"
        " select * from unnest($1::uuid[], $2::bigint[])"
        " on conflict do nothing returning event_id",
        [e.event_id for e in events],
        [delivery_of(e.stream) for e in events],
    )
    return {r["event_id"] for r in rows}
