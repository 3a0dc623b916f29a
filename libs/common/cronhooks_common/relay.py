"""The outbox relay: committed events to RabbitMQ, per-stream in order, at least once.

Why not tail `events.position`? Positions are handed out at insert, not at commit: a
reader that remembers "last position seen" skips the events of a slower transaction that
took a smaller position and committed later. Instead every append also writes an outbox
row; a row becomes visible only when its transaction commits, and the relay deletes it
only after the broker confirmed the message. Nothing committed can be skipped.

Order: within one stream, version k+1 is appended only after version k committed (the
(stream, version) key makes the writer of k+1 wait for, or fail against, k), so outbox
rows of one stream appear in version order. The relay publishes a batch in rounds that
hold at most one event per stream and waits for the confirms of a round before the next.

Exactly one relay publishes at a time: every service process runs one, and they elect a
leader with a session-level advisory lock held on the relay's own connection. If the
leader dies, Postgres drops its session and lock, and a standby takes over within
STANDBY_POLL_SECONDS. Standbys ask with `pg_try_advisory_lock` between sleeps rather
than wait in `pg_advisory_lock`: a statement waiting for a lock holds its snapshot, and
that snapshot's xmin keeps vacuum (and the index's dead-entry hints) from reclaiming any
row deleted or updated anywhere in the cluster for as long as the leader lives. The
outbox, whose every row is deleted, then grows an index of dead entries that each fetch
walks: in a 10,000 herd ~30,000 of them, 15-22 ms a fetch, ~0.3 ms of Postgres CPU per
delivery.
A crash between confirm and delete republishes those events (consumers dedupe by id).
After a batch's events, the relay sends the work notices for those of them that a service
takes as notices (work.py: the dispatcher's `delivery.requested`); the rows are deleted
only once those are confirmed too.
The delete of a batch is sent with the read of the next one, right after the confirms.

A relay can defer (`defer_seconds`): the dispatcher's does, because its process is the one
core a herd waits on, and leading means publishing every event of every service (in a
1,000 herd, ~0.1 ms of its CPU per delivery). A deferring relay waits that long before each
try for the lead, so another process's relay wins at start-up and after a failover; it
leads only when none is there, and when it leads and is idle while a relay of another
kind of process is connected, it hands the lead back (closes its session).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence

import asyncpg
import structlog
from aio_pika.abc import AbstractChannel, AbstractRobustConnection
from prometheus_client import Counter, Gauge

from cronhooks_common import db, work
from cronhooks_common.broker import (
    TRANSIENT_AMQP_ERRORS,
    declare_exchange,
    publish_messages,
    publish_round,
)
from cronhooks_common.buckets import Router, fetch_routed, partition
from cronhooks_common.clock import wait_set
from cronhooks_common.events import Event
from cronhooks_common.eventstore import EVENT_COLUMNS, event_from_row, probe_sql

log = structlog.get_logger(__name__)

RELAY_LOCK = 0x63726F6E_72656C61  # "cronrela"
PUBLISH_TIMEOUT = 30.0
STANDBY_POLL_SECONDS = 0.5  # how soon a standby takes over from a leader that died
NOTIFY_CHANNEL = "cronhooks_outbox"

PUBLISHED = Counter("cronhooks_relay_published_total", "Events published and confirmed")
LEADER = Gauge("cronhooks_relay_leader", "1 while this process is the publishing relay")

# The oldest outbox rows first: their positions and delivery ids. The events are then read
# from their own partitions by position (`_events_sql`, an index probe per position), not
# through the partitioned parent, whose plan locks and starts every partition on each
# call. The delete of the rows just confirmed rides in the same statement as the next
# read, so a batch still costs two round trips. (The statement's snapshot still shows the
# rows it deletes, hence the anti-join.)
_NEXT = "select position, delivery_id from eventstore.outbox order by position limit $1"
_DELETE_AND_NEXT = """
with confirmed as (
    delete from eventstore.outbox where position = any($1::bigint[]) returning position
)
select o.position, o.delivery_id from eventstore.outbox o
where not exists (select 1 from confirmed c where c.position = o.position)
order by o.position limit $2
"""

# Is a relay of another kind of process connected (one that does not defer to us)? Relays
# name their sessions `cronhooks-<service>-relay`; replicas of one service share the name.
_OTHER_KIND_WAITS = f"""
select exists (
    select 1 from pg_stat_activity
    where datname = current_database()
      and application_name <> current_setting('application_name')
      and application_name like '{db.APPLICATION_PREFIX}%-relay'
)
"""


def _events_sql(table: str) -> str:
    return probe_sql(table, "position", "bigint", columns=f"position, {EVENT_COLUMNS}")


def publish_rounds(events: Sequence[Event]) -> list[list[Event]]:
    """Split a batch into rounds holding at most one event per stream, in version order."""
    by_stream: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_stream[event.stream].append(event)
    rounds: list[list[Event]] = []
    for stream_events in by_stream.values():
        stream_events.sort(key=lambda e: e.version)
        for i, event in enumerate(stream_events):
            if i == len(rounds):
                rounds.append([])
            rounds[i].append(event)
    return rounds


class OutboxRelay:
    def __init__(
        self,
        *,
        dsn: str,
        amqp: AbstractRobustConnection,
        name: str,
        batch_size: int = 1000,
        poll_seconds: float = 1.0,
        defer_seconds: float = 0.0,
    ) -> None:
        self._dsn = dsn
        self._amqp = amqp
        self._name = name
        self._defer_seconds = defer_seconds
        self._batch_size = batch_size
        self._poll_seconds = poll_seconds
        self._wake = asyncio.Event()
        self._router = Router()

    async def run(self) -> None:
        """Relay forever (until cancelled), reconnecting after database or broker loss."""
        delay = 0.2
        while True:
            try:
                conn = await db.connect(self._dsn, name=f"{self._name}-relay")
            except db.TRANSIENT_DB_ERRORS as exc:
                log.warning("relay_database_unavailable", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.2
            try:
                await self._lead(conn)
            except (*db.TRANSIENT_DB_ERRORS, *TRANSIENT_AMQP_ERRORS) as exc:
                log.warning("relay_interrupted", error=repr(exc))
                await asyncio.sleep(0.5)
            except Exception:
                # The relay must outlive anything a broker or database restart can throw:
                # start over with a new connection (the outbox still holds everything).
                log.exception("relay_failed")
                await asyncio.sleep(1.0)
            finally:
                LEADER.set(0)
                conn.terminate()

    async def _lead(self, conn: asyncpg.Connection) -> None:
        """Wait for the lead, then publish until the session ends; returns when a deferring
        relay hands the lead back."""
        # Waits while another relay leads (idle between tries: no snapshot held, see above).
        # The lock lives in Postgres: there is no event to wait on instead of polling.
        while True:
            if self._defer_seconds:
                await asyncio.sleep(self._defer_seconds)
            if await conn.fetchval("select pg_try_advisory_lock($1)", RELAY_LOCK):
                break
            await asyncio.sleep(STANDBY_POLL_SECONDS)
        LEADER.set(1)
        log.info("relay_leading")
        await conn.add_listener(NOTIFY_CHANNEL, lambda *_: self._wake.set())
        channel = await self._amqp.channel(publisher_confirms=True)
        try:
            await declare_exchange(channel)
            await work.declare_work_exchange(channel)
            confirmed: list[int] = []
            while True:
                self._wake.clear()
                if confirmed:
                    queued = await conn.fetch(_DELETE_AND_NEXT, confirmed, self._batch_size)
                else:
                    queued = await conn.fetch(_NEXT, self._batch_size)
                confirmed = []
                if queued:
                    events = await self._events(conn, queued)
                    await self._publish(events, channel)
                    confirmed = [r["position"] for r in queued]
                    PUBLISHED.inc(len(queued))
                    continue  # delete them, and read what came meanwhile
                if await self._hands_back(conn):
                    log.info("relay_handing_back")
                    return  # the session closes, and the lock with it
                await wait_set(self._wake, self._poll_seconds)  # a cancel ends it (clock.py)
        finally:
            if not channel.is_closed:
                await channel.close()

    async def _hands_back(self, conn: asyncpg.Connection) -> bool:
        """Should this leader, idle now, give the lead to a relay that does not defer?"""
        if not self._defer_seconds:
            return False
        return bool(await conn.fetchval(_OTHER_KIND_WAITS))

    async def _events(self, conn: asyncpg.Connection, queued: list[asyncpg.Record]) -> list[Event]:
        """The queued rows' events, in position order, each read from its partition."""

        async def fetch(suffix: str, group: list[asyncpg.Record]) -> list[asyncpg.Record]:
            table = partition("eventstore.events", suffix)
            rows: list[asyncpg.Record] = await conn.fetch(
                _events_sql(table), [r["position"] for r in group]
            )
            return rows

        rows = await fetch_routed(conn, self._router, queued, lambda r: r["delivery_id"], fetch)
        return [event_from_row(r) for r in sorted(rows, key=lambda r: r["position"])]

    @staticmethod
    async def _publish(events: Sequence[Event], channel: AbstractChannel) -> None:
        for round_ in publish_rounds(events):
            # A confirm that never comes (the broker died mid-round) must not hang the
            # relay: time out, reconnect, publish the rows again.
            async with asyncio.timeout(PUBLISH_TIMEOUT):
                await publish_round(channel, round_)
        # The notices go after the events they name, so that whoever acts on a notice acts
        # on an event that subscribers of cronhooks.events have been sent already.
        notices = [(key, body, work.NOTICE_PROPERTIES) for key, body in work.notices(events)]
        if notices:
            async with asyncio.timeout(PUBLISH_TIMEOUT):
                await publish_messages(channel, work.WORK_EXCHANGE, notices)
