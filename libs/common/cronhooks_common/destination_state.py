"""Destination limits and holds as state in Postgres (CONTRACT §17), so that every
dispatcher replica applies a change at once.

* `shared.destination_limits`: setDestinationLimit's overrides. admin-api writes a row
  (or deletes it, when both limits are null) and appends `destination.limit_set` in one
  transaction (`set_limit`).
* `shared.destination_holds`: a `429`/`503` with `Retry-After` holds the destination until
  then; the dispatcher that got the answer writes it (`hold`), a later answer only
  lengthens it.

Readers (the dispatchers) poll `read` every half second rather than LISTEN: a
notification is lost while a listening connection is down, so a listener must poll on
reconnect anyway, and one indexed read of two small tables every half second costs a
replica next to nothing (no query per delivery: the limiter keeps what was read). A change
takes effect within about a second everywhere; the dispatcher that got a `Retry-After`
applies its own hold at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.events import (
    Causation,
    DestinationLimitSet,
    Event,
    NewEvent,
    destination_stream,
)


@dataclass(frozen=True, slots=True)
class Limit:
    """An override: None in a field is the default (concurrency) or unlimited (rate)."""

    destination: str
    max_concurrent: int | None
    max_per_second: float | None


@dataclass(frozen=True, slots=True)
class Hold:
    destination: str
    held_until: datetime


@dataclass(frozen=True, slots=True)
class State:
    limits: dict[str, Limit]
    holds: dict[str, datetime]  # only those still holding at the time of reading


_LIMITS = """
select destination, max_concurrent, max_per_second from shared.destination_limits
order by destination
"""
_HOLDS = """
select destination, held_until from shared.destination_holds where held_until > $1
order by held_until, destination
"""
_HOLD = """
insert into shared.destination_holds as h (destination, held_until, status, set_at)
values ($1, $2, $3, $4)
on conflict (destination) do update
set held_until = greatest(h.held_until, excluded.held_until),
    status = case when excluded.held_until > h.held_until then excluded.status else h.status end,
    set_at = excluded.set_at
"""
_PRUNE = "delete from shared.destination_holds where held_until < $1"
_UPSERT = """
insert into shared.destination_limits as l
    (destination, max_concurrent, max_per_second, set_by, set_at)
values ($1, $2, $3, $4, $5)
on conflict (destination) do update
set max_concurrent = excluded.max_concurrent, max_per_second = excluded.max_per_second,
    set_by = excluded.set_by, set_at = excluded.set_at
"""
_REMOVE = "delete from shared.destination_limits where destination = $1"
# Writers of one destination's stream queue here: its version cannot move meanwhile.
_LOCK = "select pg_advisory_xact_lock(hashtextextended($1, 17))"


def _limit(row: asyncpg.Record) -> Limit:
    return Limit(row["destination"], row["max_concurrent"], row["max_per_second"])


async def read(conn: asyncpg.Connection | asyncpg.Pool, now: datetime) -> State:
    """Every override, and the holds still holding at `now`."""
    limits = await conn.fetch(_LIMITS)
    holds = await conn.fetch(_HOLDS, now)
    return State(
        {row["destination"]: _limit(row) for row in limits},
        {row["destination"]: row["held_until"] for row in holds},
    )


async def limits(conn: asyncpg.Connection | asyncpg.Pool) -> list[Limit]:
    """The overrides, by destination."""
    return [_limit(row) for row in await conn.fetch(_LIMITS)]


async def holds(conn: asyncpg.Connection | asyncpg.Pool, now: datetime) -> list[Hold]:
    """The holds still holding at `now`, the first to end first."""
    return [Hold(r["destination"], r["held_until"]) for r in await conn.fetch(_HOLDS, now)]


async def hold(
    conn: asyncpg.Connection | asyncpg.Pool,
    destination: str,
    until: datetime,
    *,
    status: int,
    now: datetime,
) -> None:
    """Hold `destination` until `until` (or longer, if it is held longer already)."""
    await conn.execute(_HOLD, destination, until, status, now)


async def prune(conn: asyncpg.Connection | asyncpg.Pool, before: datetime) -> None:
    """Forget holds that ended before `before`."""
    await conn.execute(_PRUNE, before)


async def set_limit(
    conn: asyncpg.Connection,
    limit: Limit,
    *,
    actor: str,
    now: datetime,
) -> list[Event]:
    """In the caller's transaction: store the override (both limits None: remove it) and
    append its `destination.limit_set`."""
    stream = destination_stream(limit.destination)
    await conn.execute(_LOCK, stream)
    if limit.max_concurrent is None and limit.max_per_second is None:
        await conn.execute(_REMOVE, limit.destination)
    else:
        await conn.execute(
            _UPSERT, limit.destination, limit.max_concurrent, limit.max_per_second, actor, now
        )
    event = DestinationLimitSet(
        destination=limit.destination,
        max_concurrent=limit.max_concurrent,
        max_per_second=limit.max_per_second,
        by=actor,
    )
    return await eventstore.append(
        conn,
        stream,
        [NewEvent.of(event)],
        expected_version=await eventstore.stream_version(conn, stream),
        causation=Causation.new(actor=actor),
        occurred_at=now,
    )
