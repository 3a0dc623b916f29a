"""admin-api's commit-ordered reader of the event store (tail.py) skips nothing and reads
nothing twice under concurrent writers — where a reader tailing `position` loses events
(positions are handed out at insert, not at commit: the relay's trap)."""

from __future__ import annotations

import asyncio
import os
import random
from datetime import UTC, datetime
from uuid import UUID

import asyncpg

from cronhooks_common import db, eventstore
from cronhooks_common.events import Causation, NewEvent
from cronhooks_common.tail import START, Checkpoint, held_back, read_after

WRITERS = 8
EVENTS = 1600  # a multiple of WRITERS
STREAMS = 30


async def _writer(dsn: str, rng: random.Random, quota: int, committed: list[UUID]) -> None:
    conn = await db.connect(dsn, name="writer")
    try:
        written = 0
        while written < quota:
            stream = f"tailtest-{rng.randrange(STREAMS)}"
            count = min(rng.randint(1, 3), quota - written)
            try:
                async with conn.transaction():
                    if rng.random() < 0.3:  # take a transaction id early, append late
                        await conn.execute("select pg_current_xact_id()")
                        await asyncio.sleep(rng.random() * 0.01)
                    version = await eventstore.stream_version(conn, stream)
                    events = await eventstore.append(
                        conn,
                        stream,
                        [NewEvent("test.tailed", {"n": i}) for i in range(count)],
                        expected_version=version,
                        causation=Causation.new("test"),
                        occurred_at=datetime.now(UTC),
                    )
                    # Hold the transaction open after taking positions: later ones commit
                    # first with larger positions.
                    await asyncio.sleep(rng.random() * rng.choice((0.001, 0.01, 0.05)))
            except eventstore.ConcurrencyError:
                continue
            committed.extend(e.event_id for e in events)
            written += count
    finally:
        await conn.close()


async def _tail(dsn: str, done: asyncio.Event, seen: list[UUID]) -> None:
    conn = await db.connect(dsn, name="tail")
    try:
        checkpoint: Checkpoint = START
        while True:
            finished = done.is_set()  # read once more after the writers are done
            # Done only after a read that found nothing while nothing was held back (asked
            # before it): the watermark is the whole server's, so a transaction of another
            # database, another test run or a `make up` beside holds events back too.
            held = finished and await held_back(conn, checkpoint)
            events, checkpoint = await read_after(conn, checkpoint, 97)
            seen.extend(e.event_id for e in events)
            if not events:
                if finished and not held:
                    return
                await asyncio.sleep(0.002)
    finally:
        await conn.close()


async def _naive(dsn: str, done: asyncio.Event, seen: list[UUID]) -> None:
    """The trap, for contrast: remember the last position seen."""
    conn = await asyncpg.connect(dsn)
    try:
        last = 0
        while True:
            finished = done.is_set()
            rows = await conn.fetch(
                "select position, event_id from eventstore.events where position > $1"
                " order by position limit 97",
                last,
            )
            seen.extend(r["event_id"] for r in rows)
            if rows:
                last = rows[-1]["position"]
            elif finished:
                return
            else:
                await asyncio.sleep(0.002)
    finally:
        await conn.close()


async def test_the_tail_reads_every_committed_event_once_while_writers_race(
    database_url: str,
) -> None:
    seed = int(os.environ.get("TAIL_SEED", random.randrange(1 << 30)))
    print(f"\nTAIL_SEED={seed}")
    committed: list[UUID] = []
    tailed: list[UUID] = []
    naive: list[UUID] = []
    done = asyncio.Event()
    readers = [
        asyncio.create_task(_tail(database_url, done, tailed)),
        asyncio.create_task(_naive(database_url, done, naive)),
    ]
    await asyncio.gather(
        *(
            _writer(database_url, random.Random(seed + i), EVENTS // WRITERS, committed)
            for i in range(WRITERS)
        )
    )
    done.set()
    await asyncio.gather(*readers)
    assert len(committed) == EVENTS
    assert len(tailed) == len(set(tailed)), "an event was read twice"
    assert set(tailed) == set(committed), f"{len(set(committed) - set(tailed))} skipped"
    # The naive reader, in the same run, lost the events of slow transactions.
    print(f"naive position tail missed {len(set(committed) - set(naive))} of {EVENTS}")
    assert set(naive) != set(committed)


async def _append_one(conn: asyncpg.Connection, stream: str) -> None:
    await eventstore.append(
        conn,
        stream,
        [NewEvent("test.tailed", {"n": 0})],
        expected_version=0,
        causation=Causation.new("test"),
        occurred_at=datetime.now(UTC),
    )


async def test_events_behind_a_running_older_transaction_are_held_back_until_it_ends(
    database_url: str,
) -> None:
    older = await asyncpg.connect(database_url)
    newer = await asyncpg.connect(database_url)
    reader = await asyncpg.connect(database_url)
    try:
        _, after = await read_after(reader, START, 100_000)  # past whatever is stored
        assert not await held_back(reader, after)

        slow = older.transaction()
        await slow.start()
        await older.execute("select pg_current_xact_id()")  # the older transaction id
        await _append_one(older, "tailtest-held-older")
        async with newer.transaction():
            await _append_one(newer, "tailtest-held-newer")

        # The newer event is committed but waits behind the older, running transaction.
        events, checkpoint = await read_after(reader, after, 10_000)
        assert events == [] and checkpoint == after
        assert await held_back(reader, after)

        await slow.commit()
        # Both now, once no transaction elsewhere on the server (the watermark is the
        # server's: another test run, a `make up` beside) holds them back a moment longer.
        # Asked before the read: nothing held back then means the read gets the rest.
        events, checkpoint = [], after
        for _ in range(500):
            held = await held_back(reader, checkpoint)
            more, checkpoint = await read_after(reader, checkpoint, 10_000)
            events += more
            if not held and not more:
                break
            await asyncio.sleep(0.02)
        assert [e.stream for e in events] == ["tailtest-held-older", "tailtest-held-newer"]
        assert not await held_back(reader, checkpoint)
    finally:
        for conn in (older, newer, reader):
            await conn.close()
