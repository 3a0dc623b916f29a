"""Destination limits and holds as state in Postgres (CONTRACT §17), so that every
dispatcher replica applies a change at once.

* `shared.destination_limits`: setDestinationLimit's overrides. admin-api writes a row
  (or deletes it, when both limits are null) and appends `destination.limit_set` in one
  transaction (`set_limit`).
* `shared.destination_holds`: a `429`/`503` with `Retry-After` holds the destination until
  then; the dispatcher that got the answer writes it (`hold`), a later answer only
  lengthens it.
* `shared.destination_waiting`: what waits in each dispatcher process, told by the
  process every half second (`tell_waiting`), for the page (`waiting`) and the watchdog
  (`long_waits`: deliveries waiting their turn are not overdue).

Readers (the dispatchers) poll `read` every half second rather than LISTEN: a
notification is lost while a listening connection is down, so a listener must poll on
reconnect anyway, and one indexed read of two small tables every half second costs a
replica next to nothing (no query per delivery: the limiter keeps what was read). A change
takes effect within about a second everywhere; the dispatcher that got a `Retry-After`
applies its own hold at once.
"""

from __future__ import annotations

from collections.abc import Mapping
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
class Waiting:
    """What waits for one destination in one dispatcher process."""

    waiting: int  # deliveries waiting for its limits or hold now
    long_waits: tuple[int, ...] = ()  # ids of deliveries held there for long (see the table)


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
# One statement: this process's rows become exactly `$2` (a JSON array of rows).
_TELL_WAITING = """
with told as (
    select * from jsonb_to_recordset($2::jsonb)
        as t(destination text, waiting integer, long_waits bigint[])
), gone as (
    delete from shared.destination_waiting w
    where w.process = $1 and w.destination not in (select destination from told)
)
insert into shared.destination_waiting as w
    (destination, process, waiting, long_waits, seen_at)
select destination, $1, waiting, long_waits, now() from told
on conflict (destination, process) do update
set waiting = excluded.waiting, long_waits = excluded.long_waits, seen_at = excluded.seen_at
"""
_WAITING = """
select destination, sum(waiting)::integer as waiting from shared.destination_waiting
where seen_at > now() - $1 * interval '1 second' and waiting > 0
group by destination order by destination
"""
_LONG_WAITS = """
select distinct unnest(long_waits) as delivery_id from shared.destination_waiting
where seen_at > now() - $1 * interval '1 second'
"""
_PRUNE_WAITING = """
delete from shared.destination_waiting where seen_at < now() - $1 * interval '1 second'
"""
# A process tells what waits every half second; a row older than this is a process gone.
FRESH_SECONDS = 5.0
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


async def tell_waiting(
    conn: asyncpg.Connection | asyncpg.Pool, process: str, waiting: Mapping[str, Waiting]
) -> None:
    """This dispatcher process's waiting, per destination, replacing what it told before
    (an empty mapping clears it)."""
    rows = [
        {"destination": d, "waiting": w.waiting, "long_waits": list(w.long_waits)}
        for d, w in waiting.items()
    ]
    await conn.execute(_TELL_WAITING, process, rows)  # jsonb: the pools' codec encodes


async def waiting(conn: asyncpg.Connection | asyncpg.Pool) -> dict[str, int]:
    """Deliveries waiting per destination now, over every live dispatcher process."""
    rows = await conn.fetch(_WAITING, FRESH_SECONDS)
    return {row["destination"]: row["waiting"] for row in rows}


async def long_waits(conn: asyncpg.Connection | asyncpg.Pool) -> frozenset[int]:
    """The deliveries a live dispatcher process holds for their turn and has held long."""
    return frozenset(row["delivery_id"] for row in await conn.fetch(_LONG_WAITS, FRESH_SECONDS))


async def prune_waiting(conn: asyncpg.Connection | asyncpg.Pool) -> None:
    """Forget what processes that stopped telling (killed ones) told."""
    await conn.execute(_PRUNE_WAITING, 10 * FRESH_SECONDS)


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
