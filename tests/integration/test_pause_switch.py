"""The pause switch's row on the real Postgres (CONTRACT §16.4; cronhooks_common.pause): a
pause waits for the decisions under way (they hold the row FOR SHARE) and every decision
after it sees it; deciders do not wait on each other; an expired pause is ended once
however many replicas try at the same time."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands.pause import PauseCommands
from cronhooks_common import pause
from cronhooks_common.clock import ManualClock, iso
from cronhooks_common.events import DeliveriesPaused

T0 = datetime(2026, 2, 9, 10, 0, tzinfo=UTC)


async def paused_by_admin(pool: asyncpg.Pool, until: datetime | None = None) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await pause.locked(conn)
        event = DeliveriesPaused(
            since=iso(T0),
            until=None if until is None else iso(until),
            reason="outage",
            by="admin:1:a",
            replaced=False,
        )
        await pause.pause(conn, event, since=T0, until=until, now=T0)


async def test_a_pause_waits_for_the_decisions_under_way_and_later_ones_see_it(
    pool: asyncpg.Pool,
) -> None:
    async with pool.acquire() as batch, pool.acquire() as other:
        async with batch.transaction():
            assert not (await pause.deciding(batch)).active(T0)
            async with other.transaction():  # another replica deciding: no wait
                assert not (await pause.deciding(other)).active(T0)
            pausing = asyncio.create_task(paused_by_admin(pool))
            await asyncio.sleep(0.3)
            assert not pausing.done()  # waits for the batch that read "not paused"
        await asyncio.wait_for(pausing, 5)
        async with other.transaction():
            assert (await pause.deciding(other)).active(T0)


async def test_a_decision_that_waits_for_a_pause_reads_it(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as admin, admin.transaction():
        await pause.locked(admin)
        deciding = asyncio.create_task(_decide(pool))
        await asyncio.sleep(0.3)
        assert not deciding.done()
        event = DeliveriesPaused(since=iso(T0), until=None, reason="r", by="a", replaced=False)
        await pause.pause(admin, event, since=T0, until=None, now=T0)
    assert await asyncio.wait_for(deciding, 5) is True


async def _decide(pool: asyncpg.Pool) -> bool:
    async with pool.acquire() as conn, conn.transaction():
        return (await pause.deciding(conn)).active(T0)


async def test_an_expired_pause_is_ended_once_by_racing_replicas(pool: asyncpg.Pool) -> None:
    until = T0 + timedelta(minutes=30)
    await paused_by_admin(pool, until)
    later = until + timedelta(seconds=1)

    async def replica() -> pause.Pause:
        async with pool.acquire() as conn, conn.transaction():
            return await pause.end_expired(conn, later)

    results = await asyncio.gather(*(replica() for _ in range(4)))
    assert all(r.since is None and r.resumed_at == until for r in results)
    types = await pool.fetch(
        "select type, data from eventstore.events where stream = 'deliveries-pause'"
        " order by version"
    )
    assert [r["type"] for r in types] == ["deliveries.paused", "deliveries.resumed"]
    stored = await pause.current(pool)
    assert stored == pause.Pause(resumed_at=until)


async def test_pausing_after_until_came_ends_that_pause_and_starts_a_new_one(
    pool: asyncpg.Pool,
) -> None:
    """Before the scheduler got to it: the old pause ends at its until (automatic) and the
    new one starts now, not at the old since."""
    clock = ManualClock(T0)
    commands = PauseCommands(pool, clock)
    admin = Admin(1, "a")
    await commands.pause(T0 + timedelta(minutes=30), "first", admin)
    clock.set(T0 + timedelta(minutes=31))
    assert (await commands.show())["paused"] is False
    shown = await commands.pause(None, "second", admin)
    assert shown == {"paused": True, "since": clock.now(), "until": None, "reason": "second"}
    rows = await pool.fetch(
        "select type, data from eventstore.events where stream = 'deliveries-pause'"
        " order by version"
    )
    data = [json.loads(r["data"]) if isinstance(r["data"], str) else r["data"] for r in rows]
    assert [r["type"] for r in rows] == [
        "deliveries.paused",
        "deliveries.resumed",
        "deliveries.paused",
    ]
    assert data[1] == {
        "since": iso(T0),
        "resumed_at": iso(T0 + timedelta(minutes=30)),
        "automatic": True,
        "by": None,
    }
    assert data[2]["since"] == iso(clock.now()) and data[2]["replaced"] is False
