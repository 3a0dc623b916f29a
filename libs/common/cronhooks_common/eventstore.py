"""Append to and read from the event store (`eventstore.events`).

Appends run inside the caller's transaction, next to the caller's own state changes,
and put each event into the outbox so the relay publishes it once the transaction commits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from cronhooks_common import jsonfast
from cronhooks_common.buckets import KEPT, Router, delivery_of, fetch_routed, partition
from cronhooks_common.events import Causation, Event, NewEvent


class ConcurrencyError(Exception):
    """The stream is not at the expected version: someone else appended first.

    The transaction may hold a partial append: roll it back (leaving the `transaction()`
    block by this exception does that).
    """

    def __init__(self, stream: str, expected: int) -> None:
        super().__init__(f"stream {stream} is not at version {expected}")
        self.stream = stream
        self.expected = expected


# One round trip appends the events and queues them in the outbox. Through the
# partitioned parent: an insert routes each row to its bucket's partition without planning
# the others (`bench retention --lookups`). The outbox row carries the delivery id, so the
# relay reads the event from its partition.
_INSERT = """
with appended as (
    insert into eventstore.events
        (stream, version, event_id, type, data, correlation_id, causation_id, actor, occurred_at,
         delivery_id)
    select $1, v, id, t, d::jsonb, $5, $6, $7, $8, eventstore.delivery_of($1)
    from unnest($2::int[], $3::uuid[], $4::text[], $9::text[]) as x(v, id, t, d)
    on conflict (stream, version, delivery_id) do nothing
    returning position, delivery_id
)
insert into eventstore.outbox (position, delivery_id) select position, delivery_id from appended
returning position
"""


async def append(
    conn: asyncpg.Connection,
    stream: str,
    events: Sequence[NewEvent],
    *,
    expected_version: int,
    causation: Causation,
    occurred_at: datetime,
) -> list[Event]:
    """Append `events` to `stream`, which must be at `expected_version` (0: new stream).

    Raises `ConcurrencyError` instead of overwriting when another writer got there first.
    """
    if not events:
        return []
    versions = list(range(expected_version + 1, expected_version + 1 + len(events)))
    positions = await conn.fetch(
        _INSERT,
        stream,
        versions,
        [e.event_id for e in events],
        [e.type for e in events],
        causation.correlation_id,
        causation.causation_id,
        causation.actor,
        occurred_at,
        [jsonfast.dumps(e.data) for e in events],
    )
    if len(positions) != len(events):
        raise ConcurrencyError(stream, expected_version)
    return [
        Event(
            event_id=e.event_id,
            type=e.type,
            stream=stream,
            version=v,
            occurred_at=occurred_at,
            data=e.data,
            correlation_id=causation.correlation_id,
            causation_id=causation.causation_id,
            actor=causation.actor,
        )
        for e, v in zip(events, versions, strict=True)
    ]


async def append_many(
    conn: asyncpg.Connection,
    batch: Sequence[tuple[str, int, NewEvent, Causation]],
    *,
    occurred_at: datetime,
) -> list[Event]:
    """Append one event to each of many streams in one round trip (the scheduler's bursts).

    Each item is (stream, expected_version, event, causation); a stream may take several,
    at consecutive versions. All or nothing: if any
    stream has moved, `ConcurrencyError` names the first such stream.
    """
    if not batch:
        return []
    rows = await conn.fetch(
        """
        with appended as (
            insert into eventstore.events
                (stream, version, event_id, type, data, correlation_id, causation_id, actor,
                 occurred_at, delivery_id)
            select s, v, id, t, d::jsonb, c, k, a, $8, eventstore.delivery_of(s)
            from unnest($1::text[], $2::int[], $3::uuid[], $4::text[], $5::text[], $6::uuid[],
                        $7::uuid[], $9::text[]) as x(s, v, id, t, d, c, k, a)
            on conflict (stream, version, delivery_id) do nothing
            returning stream, position, delivery_id
        ), queued as (
            insert into eventstore.outbox (position, delivery_id)
            select position, delivery_id from appended
        )
        select stream from appended
        """,
        [s for s, _, _, _ in batch],
        [v + 1 for _, v, _, _ in batch],
        [e.event_id for _, _, e, _ in batch],
        [e.type for _, _, e, _ in batch],
        [jsonfast.dumps(e.data) for _, _, e, _ in batch],
        [c.correlation_id for _, _, _, c in batch],
        [c.causation_id for _, _, _, c in batch],
        occurred_at,
        [c.actor for _, _, _, c in batch],
    )
    if len(rows) != len(batch):
        # A stream may take two events (a delivery's success and its run's start): the
        # first whose events were not all written has moved.
        written = Counter(r["stream"] for r in rows)
        wanted = Counter(s for s, _, _, _ in batch)
        missing = next(s for s in wanted if written[s] != wanted[s])
        raise ConcurrencyError(missing, next(v for s, v, _, _ in batch if s == missing))
    return [
        Event(
            event_id=e.event_id,
            type=e.type,
            stream=s,
            version=v + 1,
            occurred_at=occurred_at,
            data=e.data,
            correlation_id=c.correlation_id,
            causation_id=c.causation_id,
            actor=c.actor,
        )
        for s, v, e, c in batch
    ]


async def stream_version(conn: asyncpg.Connection | asyncpg.Pool, stream: str) -> int:
    """The current version of `stream` (0 if it has no events)."""
    version: int = await conn.fetchval(
        f"select coalesce(max(version), 0) from {_table_of(stream)}"
        " where stream = $1 and delivery_id = eventstore.delivery_of($1)",
        stream,
    )
    return version


async def read_stream(conn: asyncpg.Connection | asyncpg.Pool, stream: str) -> list[Event]:
    rows = await conn.fetch(
        f"select {EVENT_COLUMNS} from {_table_of(stream)}"
        " where stream = $1 and delivery_id = eventstore.delivery_of($1) order by version",
        stream,
    )
    return [event_from_row(r) for r in rows]


def _table_of(stream: str) -> str:
    """A stream kept forever (a webhook's, an agent's, a key's...) is read from its
    partition alone; a delivery's, rarely read whole, through the parent (the delivery id
    in the condition skips the other partitions' scans, not their planning)."""
    return "eventstore.events" if delivery_of(stream) else partition("eventstore.events", KEPT)


async def read_events(
    conn: asyncpg.Connection | asyncpg.Pool,
    keys: Sequence[tuple[UUID, str]],
    router: Router,
) -> dict[UUID, Event]:
    """The stored events with these (event id, stream) keys, as a message names them
    (consumers check messages against them). Each is looked for in the partition of the
    stream the message names: an event the message misnames is not found, as it would be
    refused anyway (trust.py)."""

    async def fetch(suffix: str, group: list[tuple[UUID, str]]) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            probe_sql(partition("eventstore.events", suffix), "event_id", "uuid"),
            [event_id for event_id, _ in group],
        )
        return rows

    rows = await fetch_routed(conn, router, list(keys), lambda k: delivery_of(k[1]), fetch)
    return {r["event_id"]: event_from_row(r) for r in rows}


async def read_all(
    conn: asyncpg.Connection, *, after_position: int = 0, limit: int = 1000
) -> list[tuple[int, Event]]:
    """Committed history in position order, for replays (not for tailing live writes)."""
    rows = await conn.fetch(
        f"select position, {EVENT_COLUMNS} from eventstore.events"
        " where position > $1 order by position limit $2",
        after_position,
        limit,
    )
    return [(r["position"], event_from_row(r)) for r in rows]


# The columns `event_from_row` reads, for readers of the event store elsewhere (tail.py,
# relay.py, admin-api's live tail).
EVENT_COLUMNS = (
    "event_id, type, stream, version, occurred_at, data, correlation_id, causation_id,"
    " actor, schema_version"
)


def probe_sql(table: str, column: str, array_type: str, *, columns: str = EVENT_COLUMNS) -> str:
    """A statement for the rows of `table` whose unique `column` is one of the array $1:
    one index probe per key, `k.i` numbering the keys from 1.

    Not `where column = any($1)`: asyncpg's prepared statement keeps the generic plan of
    its first calls, and a partition that was nearly empty then (a delivery bucket just
    opened, the kept partition of a fresh install) keeps a seq scan as it grows, until it
    is analyzed: in a 10,000 herd the change matcher's read of events_kept scanned 8,000
    rows for 6 (454 calls, 5 ms each). A lateral subquery with `limit 1` is an index probe
    however few rows the table held when it was planned."""
    return f"""
select k.i, e.* from unnest($1::{array_type}[]) with ordinality as k(key, i)
cross join lateral (
    select {columns} from {table} x where x.{column} = k.key limit 1
) e"""


def event_from_row(row: asyncpg.Record) -> Event:
    return Event(
        event_id=row["event_id"],
        type=row["type"],
        stream=row["stream"],
        version=row["version"],
        occurred_at=row["occurred_at"],
        data=row["data"],
        correlation_id=row["correlation_id"],
        causation_id=row["causation_id"],
        actor=row["actor"],
        schema_version=row["schema_version"],
    )
