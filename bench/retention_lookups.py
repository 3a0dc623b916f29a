"""`python -m bench retention --lookups`: the hot path's statements on one table against
the same rows in delivery-id partitions, asked three ways — the statement as it is today
on one table, the statement through the partitioned parent (what an earlier attempt did:
asyncpg's prepared statements get generic plans, which plan, lock and start every
partition), and routed to the one partition the rows are in (what the code does).

Medians of 50 calls of a prepared statement after 10 warm-up calls (so the generic plan
is the one measured). The tables are built here with plain SQL, shaped as the event store
and the dispatcher's inbox are."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from bench.common import PG_SERVER, median, table

PARTITIONS = int(
    __import__("os").environ.get("P", 32)
)  # 30 days of daily buckets, the one being filled and a spare
PER_BUCKET = 4_000  # deliveries per bucket, two events each
KEPT = 20_000  # webhook, note and trigger events
CALLS, WARMUP = 50, 10

_COLUMNS = (
    "stream text not null, version integer not null, position bigint not null,"
    " event_id uuid not null, type text not null, schema_version smallint not null default 1,"
    " data jsonb not null, correlation_id uuid not null, causation_id uuid, actor text,"
    " occurred_at timestamptz not null, recorded_at timestamptz not null default now(),"
    " txid bigint not null, delivery_id bigint not null"
)


async def _build(conn: asyncpg.Connection) -> None:
    await conn.execute(
        f"""
        create schema one; create schema part;
        create table one.events ({_COLUMNS}, primary key (stream, version));
        create unique index on one.events (position);
        create unique index on one.events (event_id);
        create index on one.events (txid, position);
        create table part.events ({_COLUMNS}, primary key (delivery_id, stream, version))
            partition by range (delivery_id);
        create table part.events_kept partition of part.events for values from (0) to (1);
        create table one.inbox (event_id uuid primary key);
        create table part.inbox (event_id uuid not null, delivery_id bigint not null,
            primary key (event_id, delivery_id)) partition by range (delivery_id);
        create table part.inbox_kept partition of part.inbox for values from (0) to (1);
        create table secrets (webhook_id bigint primary key, ciphertext bytea not null);
        insert into secrets select g, '\\x00' from generate_series(1, 1000) g;
        create table one.outbox (position bigint primary key);
        create table part.outbox (position bigint primary key, delivery_id bigint not null);
        """
    )
    for b in range(PARTITIONS):
        lo, hi = 1 + b * PER_BUCKET, 1 + (b + 1) * PER_BUCKET
        await conn.execute(
            f"create table part.events_{b} partition of part.events"
            f" for values from ({lo}) to ({hi});"
            f"create table part.inbox_{b} partition of part.inbox"
            f" for values from ({lo}) to ({hi})"
        )
    await conn.execute(
        "create index on part.events (position); create index on part.events (event_id);"
        " create index on part.events (txid, position)"
    )
    await conn.execute(
        """
        insert into one.events (stream, version, position, event_id, type, data, correlation_id,
                                occurred_at, txid, delivery_id)
        select 'delivery-' || d, v, (d - 1) * 2 + v + $2, gen_random_uuid(),
               case v when 1 then 'delivery.requested' else 'delivery.succeeded' end,
               jsonb_build_object('delivery_id', d, 'webhook_id', 1 + d % 1000, 'attempt', 1,
                                  'url', 'https://agent.example/hook'),
               gen_random_uuid(), now(), (d - 1) * 2 + v + $2, d
        from generate_series(1, $1::int) d, generate_series(1, 2) v
        """,
        PARTITIONS * PER_BUCKET,
        KEPT,
    )
    await conn.execute(
        """
        insert into one.events (stream, version, position, event_id, type, data, correlation_id,
                                occurred_at, txid, delivery_id)
        select 'webhook-' || g, 1, g, gen_random_uuid(), 'webhook.created',
               jsonb_build_object('webhook_id', g), gen_random_uuid(), now(), g, 0
        from generate_series(1, $1::int) g
        """,
        KEPT,
    )
    await conn.execute(
        """
        insert into part.events select * from one.events;
        insert into one.inbox select event_id from one.events where position % 2 = 0;
        insert into part.inbox select event_id, delivery_id from one.events where position % 2 = 0;
        analyze;
        """
    )


async def _median_ms(call: Callable[[], Awaitable[object]]) -> float:
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return median(times)


_LOOKUP = """
select k.i, e.event_id, e.type, e.stream, e.version, e.occurred_at, e.data, e.correlation_id,
       e.causation_id, e.actor, e.schema_version,
       exists (select 1 from {inbox} i where i.event_id = k.event_id) as handled,
       (select s.ciphertext from secrets s
        where s.webhook_id = (e.data->>'webhook_id')::bigint) as sealed_secret
from unnest($1::uuid[]) with ordinality as k(event_id, i)
left join {events} e on e.event_id = k.event_id {extra}
"""
_LOOKUP_PARENT = """
select k.i, e.event_id, e.type, e.stream, e.version, e.occurred_at, e.data, e.correlation_id,
       e.causation_id, e.actor, e.schema_version,
       exists (select 1 from part.inbox i
               where i.event_id = k.event_id and i.delivery_id = k.delivery_id) as handled,
       (select s.ciphertext from secrets s
        where s.webhook_id = (e.data->>'webhook_id')::bigint) as sealed_secret
from unnest($1::uuid[], $2::bigint[]) with ordinality as k(event_id, delivery_id, i)
left join part.events e on e.event_id = k.event_id and e.delivery_id = k.delivery_id
"""
_FETCH = """
select o.position, e.event_id, e.type, e.stream, e.version, e.data
from (select position {okey} from {outbox} o order by position limit $1) o
cross join lateral (
    select * from {events} e where e.position = o.position {extra} limit 1
) e
order by o.position
"""
_BY_POSITION = """
select position, event_id, type, stream, version, data from {events}
where position = any($1::bigint[]) order by position
"""
_READ_EVENTS = "select event_id, type, stream, version, data from {events} where {cond}"
_TAIL = """
select txid, position, event_id, type, stream, version, data from {events}
where (txid, position) > ($1, $2) and txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
order by txid, position limit $3
"""
_APPEND = """
with appended as (
    insert into {events} (stream, version, position, event_id, type, data, correlation_id,
                          occurred_at, txid, delivery_id)
    select s, 3, p, gen_random_uuid(), 'delivery.succeeded', '{{}}'::jsonb, gen_random_uuid(),
           now(), p, d
    from unnest($1::text[], $2::bigint[], $3::bigint[]) as x(s, p, d)
    on conflict do nothing
    returning position {ret}
)
insert into {outbox} (position {okey}) select position {ret} from appended
"""


async def _rolled_back(conn: asyncpg.Connection, stmt: asyncpg.PreparedStatement, *args: object):
    tx = conn.transaction()
    await tx.start()
    try:
        await stmt.fetch(*args)
    finally:
        await tx.rollback()


async def lookups() -> list[tuple[str, str]]:
    name = f"cronhooks_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{PG_SERVER}/postgres")
    await admin.execute(f'create database "{name}"')
    try:
        conn = await asyncpg.connect(f"{PG_SERVER}/{name}")
        try:
            await _build(conn)
            rows = await _measure(conn)
        finally:
            await conn.close()
    finally:
        await admin.execute(f'drop database if exists "{name}" with (force)')
        await admin.close()
    text = table(["statement", "one table", f"{PARTITIONS + 1} partitions, parent", "routed"], rows)
    return [("Hot-path statements: one table vs partitions (ms, median of 50)", text)]


async def _measure(conn: asyncpg.Connection) -> list[list[object]]:
    last = PARTITIONS - 1
    newest = await conn.fetch(
        "select event_id, delivery_id, position from one.events where delivery_id > 0"
        " order by position desc limit 256"
    )
    rows: list[list[object]] = []

    async def row(label: str, *calls: Callable[[], Awaitable[object]]) -> None:
        rows.append([label, *[f"{await _median_ms(c):.3f}" for c in calls]])

    for n in (7, 256):
        ids = [r["event_id"] for r in newest[:n]]
        dids = [r["delivery_id"] for r in newest[:n]]
        one = await conn.prepare(_LOOKUP.format(inbox="one.inbox", events="one.events", extra=""))
        parent = await conn.prepare(_LOOKUP_PARENT)
        routed = await conn.prepare(
            _LOOKUP.format(inbox=f"part.inbox_{last}", events=f"part.events_{last}", extra="")
        )
        await row(
            f"dispatcher lookup, {n} keys",
            lambda one=one, ids=ids: one.fetch(ids),
            lambda parent=parent, ids=ids, dids=dids: parent.fetch(ids, dids),
            lambda routed=routed, ids=ids: routed.fetch(ids),
        )

    # The relay: ten outbox rows, of the newest bucket.
    await conn.execute(
        "insert into one.outbox select position from one.events where delivery_id > 0"
        " order by position desc limit 10;"
        "insert into part.outbox select position, delivery_id from one.events"
        " where delivery_id > 0 order by position desc limit 10"
    )
    positions = [r["position"] for r in newest[:10]]
    fetch_one = await conn.prepare(
        _FETCH.format(okey="", outbox="one.outbox", events="one.events", extra="")
    )
    fetch_parent = await conn.prepare(
        _FETCH.format(
            okey=", delivery_id",
            outbox="part.outbox",
            events="part.events",
            extra="and e.delivery_id = o.delivery_id",
        )
    )
    outbox_read = await conn.prepare(
        "select position, delivery_id from part.outbox order by position limit $1"
    )
    by_position = await conn.prepare(_BY_POSITION.format(events=f"part.events_{last}"))

    async def routed_fetch() -> None:
        # What the relay does: the outbox rows, then each bucket's events by position.
        got = await outbox_read.fetch(10)
        await by_position.fetch([r["position"] for r in got])

    await row(
        "relay fetch, 10 rows",
        lambda: fetch_one.fetch(10),
        lambda: fetch_parent.fetch(10),
        routed_fetch,
    )
    ids = [r["event_id"] for r in newest[:10]]
    dids = [r["delivery_id"] for r in newest[:10]]
    read_one = await conn.prepare(
        _READ_EVENTS.format(events="one.events", cond="event_id = any($1::uuid[])")
    )
    read_parent = await conn.prepare(
        _READ_EVENTS.format(
            events="part.events",
            cond="event_id = any($1::uuid[]) and delivery_id = any($2::bigint[])",
        )
    )
    read_routed = await conn.prepare(
        _READ_EVENTS.format(events=f"part.events_{last}", cond="event_id = any($1::uuid[])")
    )
    await row(
        "consumer read of stored events, 10 ids",
        lambda: read_one.fetch(ids),
        lambda: read_parent.fetch(ids, dids),
        lambda: read_routed.fetch(ids),
    )
    # Tails: a checkpoint 100 events before the end (the projector, the change matcher).
    cp = await conn.fetchrow(
        "select txid, position from one.events order by txid desc, position desc offset 100 limit 1"
    )
    tail_one = await conn.prepare(_TAIL.format(events="one.events"))
    tail_parent = await conn.prepare(_TAIL.format(events="part.events"))
    await row(
        "tail read, 100 events",
        lambda: tail_one.fetch(cp["txid"], cp["position"], 1000),
        lambda: tail_parent.fetch(cp["txid"], cp["position"], 1000),
        lambda: tail_parent.fetch(cp["txid"], cp["position"], 1000),
    )
    by_one = await conn.prepare(_BY_POSITION.format(events="one.events"))
    by_parent = await conn.prepare(_BY_POSITION.format(events="part.events"))
    await row(
        "events by position, 10 (matcher's fetch)",
        lambda: by_one.fetch(positions),
        lambda: by_parent.fetch(positions),
        lambda: by_position.fetch(positions),
    )
    # The append of ten events of deliveries in the newest bucket, rolled back each time.
    streams = [f"delivery-{d}" for d in dids]
    fresh = [10_000_000 + i for i in range(10)]
    app_one = await conn.prepare(
        _APPEND.format(events="one.events", outbox="one.outbox", ret="", okey="")
    )
    app_parent = await conn.prepare(
        _APPEND.format(
            events="part.events", outbox="part.outbox", ret=", delivery_id", okey=", delivery_id"
        )
    )
    app_routed = await conn.prepare(
        _APPEND.format(
            events=f"part.events_{last}",
            outbox="part.outbox",
            ret=", delivery_id",
            okey=", delivery_id",
        )
    )
    await row(
        "append of 10 events (with outbox rows)",
        lambda: _rolled_back(conn, app_one, streams, fresh, dids),
        lambda: _rolled_back(conn, app_parent, streams, fresh, dids),
        lambda: _rolled_back(conn, app_routed, streams, fresh, dids),
    )
    return rows
