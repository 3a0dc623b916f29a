"""`python -m bench retention --lookups`: the hot path's statements with one events table
(as on main before retention) against the same rows in delivery buckets.

A migrated scratch database gets 33 delivery buckets of PER_BUCKET deliveries (two events
each, the older 31 sealed as retention seals them: a 30-day retention, the open bucket and
its spare), plus webhook events in the kept partition. A copy of the same rows in one
table with main's indexes (`public.events_one`) is the baseline, asked with main's SQL.
The bucketed side is asked through the code itself (the dispatcher's loader, the relay,
the consumers' read, the projector's live tail, the matcher's kept tail, append_many),
and, for contrast, the same statement through the partitioned parent (what a first
attempt did: asyncpg's prepared statements get generic plans, which lock and start every
partition).

Medians of CALLS calls after WARMUP (so generic plans are the ones measured), the three
variants of a row interleaved call by call so that a busy moment of the box hits all
three alike.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg

from bench.common import median, scratch_database, table
from cronhooks_admin.projections.live_tail import LiveTail
from cronhooks_common import eventstore
from cronhooks_common.buckets import Router
from cronhooks_common.events import Causation, NewEvent
from cronhooks_common.eventstore import EVENT_COLUMNS, event_from_row
from cronhooks_common.relay import _DELETE_AND_NEXT, OutboxRelay
from cronhooks_common.tail import KEPT_EVENTS, Checkpoint, read_after, scan_after
from cronhooks_dispatcher.lookup import DeliveryLookups
from cronhooks_scheduler import bucket_ddl

BUCKETS = 33
PER_BUCKET = 4_000  # deliveries per bucket
KEPT = 20_000  # webhook events
CALLS, WARMUP = 200, 20
FIRST = 100_001  # bucket 1 of a fresh database is [1, 100001): the bench's start after it

_ONE_TABLE = """
create table public.events_one (like eventstore.events including defaults);
alter table public.events_one add primary key (stream, version);
create unique index on public.events_one (position);
create unique index on public.events_one (event_id);
create index on public.events_one (txid, position);
insert into public.events_one select * from eventstore.events;
create table public.outbox_one (position bigint primary key);
create table public.inbox_one (event_id uuid primary key);
insert into public.inbox_one select event_id from eventstore.events where position % 2 = 0;
analyze;
"""
# main's statements, on the one-table copy.
_MAIN_LOOKUP = """
select k.i, e.event_id, e.type, e.stream, e.version, e.occurred_at, e.data, e.correlation_id,
       e.causation_id, e.actor, e.schema_version,
       exists (select 1 from public.inbox_one i where i.event_id = k.event_id) as handled,
       (select s.ciphertext from shared.webhook_secrets s
        where s.webhook_id = (e.data->>'webhook_id')::bigint) as sealed_secret
from unnest($1::uuid[]) with ordinality as k(event_id, i)
left join {events} e on e.event_id = k.event_id
"""
_MAIN_FETCH = f"""
select o.position, {", ".join("e." + c.strip() for c in EVENT_COLUMNS.split(","))}
from (select position from {{outbox}} order by position limit $1) o
cross join lateral (
    select * from {{events}} e where e.position = o.position limit 1
) e
order by o.position
"""
_MAIN_READ = f"select {EVENT_COLUMNS} from {{events}} where event_id = any($1::uuid[])"
_MAIN_APPEND = """
with appended as (
    insert into public.events_one
        (stream, version, event_id, type, data, correlation_id, causation_id, actor,
         occurred_at, delivery_id)
    select s, v, id, t, d::jsonb, c, k, a, $8, eventstore.delivery_of(s)
    from unnest($1::text[], $2::int[], $3::uuid[], $4::text[], $5::text[], $6::uuid[],
                $7::uuid[], $9::text[]) as x(s, v, id, t, d, c, k, a)
    on conflict (stream, version) do nothing
    returning stream, position
), queued as (
    insert into public.outbox_one (position) select position from appended
)
select stream from appended
"""


async def _fill(conn: asyncpg.Connection) -> None:
    # The bench's buckets after bucket 1, all but the last two sealed; ids up to the last.
    for b in range(BUCKETS):
        lo = FIRST + b * PER_BUCKET
        await bucket_ddl.create_bucket(conn, b + 2, lo, lo + PER_BUCKET)
    await conn.execute(
        """
        insert into shared.webhook_secrets (webhook_id, ciphertext)
        select g, '\\x00' from generate_series(1, 1000) g;
        insert into eventstore.events
            (stream, version, event_id, type, data, correlation_id, occurred_at, delivery_id)
        select 'webhook-' || g, 1, gen_random_uuid(), 'webhook.created',
               jsonb_build_object('webhook_id', g), gen_random_uuid(), now(), 0
        from generate_series(1, 20000) g
        """
    )
    await conn.execute(
        """
        insert into eventstore.events
            (stream, version, event_id, type, data, correlation_id, occurred_at, delivery_id)
        select 'delivery-' || d, v, gen_random_uuid(),
               case v when 1 then 'delivery.requested' else 'delivery.succeeded' end,
               jsonb_build_object('delivery_id', d, 'webhook_id', 1 + d % 1000, 'attempt', 1,
                                  'url', 'https://agent.example/hook', 'instruction', 'digest'),
               gen_random_uuid(), now(), d
        from generate_series($1::bigint, $2::bigint) d, generate_series(1, 2) v
        order by d, v
        """,
        FIRST,
        FIRST + BUCKETS * PER_BUCKET - 1,
    )
    for b in range(BUCKETS - 2):
        async with conn.transaction():
            await bucket_ddl.seal_bucket(conn, b + 2)
    await conn.execute(
        "insert into dispatcher.inbox (event_id, delivery_id) select event_id, delivery_id"
        " from eventstore.events where position % 2 = 0"
    )
    await conn.execute(_ONE_TABLE)


async def lookups() -> list[tuple[str, str]]:
    async with scratch_database() as dsn:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        try:
            async with pool.acquire() as conn:
                await _fill(conn)
            rows = await _measure(pool)
        finally:
            await pool.close()
    headers = ["statement", "one table (main)", f"{BUCKETS} buckets, routed (this branch)"]
    headers.append(f"{BUCKETS} buckets, through the parent")
    text = table(headers, rows)
    return [("Hot-path statements: one table vs delivery buckets (ms, median)", text)]


async def _as_events(rows: Awaitable[list[asyncpg.Record]]) -> list[object]:
    """What the code makes of the rows (main did the same): the baseline pays it too."""
    return [event_from_row(r) for r in await rows if r["event_id"] is not None]


async def _interleaved(*calls: Callable[[], Awaitable[object]]) -> list[str]:
    for _ in range(WARMUP):
        for call in calls:
            await call()
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(CALLS):
        for i, call in enumerate(calls):
            start = time.perf_counter()
            await call()
            times[i].append((time.perf_counter() - start) * 1000)
    return [f"{median(t):.3f}" for t in times]


async def _rolled_back(conn: asyncpg.Connection, work: Callable[[], Awaitable[object]]) -> None:
    tx = conn.transaction()
    await tx.start()
    try:
        await work()
    finally:
        await tx.rollback()


async def _measure(pool: asyncpg.Pool) -> list[list[object]]:
    rows: list[list[object]] = []
    conn: asyncpg.Connection
    async with pool.acquire() as conn:
        newest = await conn.fetch(
            "select event_id, stream, delivery_id, position from eventstore.events"
            " where delivery_id > 0 order by position desc limit 256"
        )

    async def row(label: str, *calls: Callable[[], Awaitable[object]]) -> None:
        rows.append([label, *await _interleaved(*calls)])

    loader = DeliveryLookups(pool)
    for n in (7, 256):
        keys = [(r["event_id"], r["stream"]) for r in newest[:n]]
        ids = [k[0] for k in keys]
        await row(
            f"dispatcher lookup, {n} keys",
            lambda ids=ids: _as_events(
                pool.fetch(_MAIN_LOOKUP.format(events="public.events_one"), ids)
            ),
            lambda keys=keys: loader.batch_load_fn(keys),
            lambda ids=ids: _as_events(
                pool.fetch(_MAIN_LOOKUP.format(events="eventstore.events"), ids)
            ),
        )
    async with pool.acquire() as conn:
        await _relay_and_reads(conn, newest, row)
    return rows


async def _relay_and_reads(
    conn: asyncpg.Connection,
    newest: list[asyncpg.Record],
    row: Callable[..., Awaitable[None]],
) -> None:
    ten = newest[:10]
    positions = [r["position"] for r in ten]
    await conn.execute("insert into public.outbox_one select unnest($1::bigint[])", positions)
    await conn.execute(
        "insert into eventstore.outbox (position, delivery_id)"
        " select * from unnest($1::bigint[], $2::bigint[])",
        positions,
        [r["delivery_id"] for r in ten],
    )
    relay = OutboxRelay(dsn="", amqp=None, name="bench")  # type: ignore[arg-type]

    async def main_relay_turn() -> None:
        # main: fetch outbox rows with their events, then delete them
        got = await conn.fetch(
            _MAIN_FETCH.format(outbox="public.outbox_one", events="public.events_one"), 10
        )
        await conn.execute(
            "delete from public.outbox_one where position = any($1::bigint[])",
            [r["position"] for r in got],
        )

    async def routed_relay_turn() -> None:
        # this branch: delete the last batch and read the next rows, then their events
        queued = await conn.fetch(_DELETE_AND_NEXT, [0], 10)
        await relay._events(conn, queued)

    async def parent_relay_turn() -> None:
        got = await conn.fetch(
            _MAIN_FETCH.format(outbox="eventstore.outbox", events="eventstore.events"), 10
        )
        await conn.execute(
            "delete from eventstore.outbox where position = any($1::bigint[])",
            [r["position"] for r in got],
        )

    await row(
        "relay turn, 10 events (read + delete)",
        lambda: _rolled_back(conn, main_relay_turn),
        lambda: _rolled_back(conn, routed_relay_turn),
        lambda: _rolled_back(conn, parent_relay_turn),
    )
    keys = [(r["event_id"], r["stream"]) for r in ten]
    ids = [k[0] for k in keys]
    router = Router()
    await row(
        "consumer read of stored events, 10",
        lambda: _as_events(conn.fetch(_MAIN_READ.format(events="public.events_one"), ids)),
        lambda: eventstore.read_events(conn, keys, router),
        lambda: _as_events(conn.fetch(_MAIN_READ.format(events="eventstore.events"), ids)),
    )
    cp_row = await conn.fetchrow(
        "select txid, position from eventstore.events order by txid desc, position desc"
        " offset 100 limit 1"
    )
    cp = Checkpoint(cp_row["txid"], cp_row["position"])
    tail = LiveTail()
    await row(
        "projector tail read, 100 events",
        # main's read_after is tail.py's with the one table
        lambda: read_after(conn, cp, 2000, table="public.events_one"),
        lambda: tail.read_after(conn, cp, 2000),
        lambda: read_after(conn, cp, 2000),
    )
    await row(
        "projector held-back check",
        lambda: conn.fetchval(
            "select min(txid) is not null from public.events_one where txid > $1"
            " and txid >= pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
            cp.txid,
        ),
        lambda: tail.held_back(conn, cp),
        lambda: conn.fetchval(
            "select min(txid) is not null from eventstore.events where txid > $1"
            " and txid >= pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
            cp.txid,
        ),
    )
    # The matcher, 2,000 events behind the end (a herd's delivery events on main).
    behind = await conn.fetchrow(
        "select txid, position from eventstore.events order by txid desc, position desc"
        " offset 2000 limit 1"
    )
    mcp = Checkpoint(behind["txid"], behind["position"])
    await row(
        "change matcher scan (2,000 events behind)",
        lambda: scan_after(conn, mcp, 2000, types=["note.changed"], table="public.events_one"),
        lambda: scan_after(conn, mcp, 2000, types=["note.changed"], table=KEPT_EVENTS),
        lambda: scan_after(conn, mcp, 2000, types=["note.changed"]),
    )
    streams = list(dict.fromkeys(r["stream"] for r in newest))[:10]  # ten deliveries at v2

    def batch() -> list[tuple[str, int, NewEvent, Causation]]:
        return [(s, 2, NewEvent("delivery.succeeded", {"x": 1}), Causation.new()) for s in streams]

    now = datetime.now(UTC)

    async def main_append() -> None:
        b = batch()
        await conn.fetch(
            _MAIN_APPEND,
            [s for s, _, _, _ in b],
            [3] * len(b),
            [uuid.uuid4() for _ in b],
            [e.type for _, _, e, _ in b],
            ['{"x": 1}'] * len(b),
            [c.correlation_id for _, _, _, c in b],
            [None] * len(b),
            now,
            [None] * len(b),
        )

    await row(
        "append_many of 10 events (rolled back)",
        lambda: _rolled_back(conn, main_append),
        lambda: _rolled_back(conn, lambda: eventstore.append_many(conn, batch(), occurred_at=now)),
        lambda: _rolled_back(conn, lambda: eventstore.append_many(conn, batch(), occurred_at=now)),
    )
