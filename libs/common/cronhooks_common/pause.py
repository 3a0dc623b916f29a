"""The pause switch (CONTRACT §16.4): one row, `shared.delivery_pause`, that every replica
of every service reads — state in Postgres, so replicas agree the moment a pause commits.

Writers (admin-api's pauseDeliveries/resumeDeliveries, and whoever ends a pause whose
`until` came: the scheduler's loop, or admin-api first) lock the row FOR UPDATE and append
`deliveries.paused` / `deliveries.resumed` on `deliveries-pause` in that transaction.
Deciders — the scheduler's firing transaction, the importer's change step, admin-api's
manual deliveries — read it FOR SHARE (`deciding`) first thing in their transaction,
before they decide anything:

* a pause's UPDATE waits for every transaction that read "not paused" and may still be
  requesting deliveries; they commit first. So once pauseDeliveries answers, nothing new
  is requested: every later decider's read waits for or sees the pause.
* a decider that reads while the pause is committing waits for it and, in READ COMMITTED,
  reads the row as the pause left it.
Share locks never wait on each other, so deciders run side by side; the cost is one row
lock per decision (a batch of up to 1,000 timers, one change step), not per delivery.

A pause past its `until` is over for every reader at once (`Pause.active`), whether or not
its `deliveries.resumed` was appended yet; `end_expired` appends it, once: the row lock
makes a second replica find the row already cleared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.clock import iso
from cronhooks_common.events import (
    PAUSE_STREAM,
    Causation,
    DeliveriesPaused,
    DeliveriesResumed,
    Event,
    NewEvent,
    Payload,
)

# The scheduler's timer channel: a resume makes the timers it held due at once, and a
# pause's `until` is a time the scheduler must wake at.
WAKE_CHANNEL = "cronhooks_timers"

_COLUMNS = "since, until, reason, paused_by, resumed_at"
_READ = f"select {_COLUMNS} from shared.delivery_pause"
_SHARE = f"{_READ} for share"
_LOCK = f"{_READ} for update"
_SET = """
update shared.delivery_pause set since = $1, until = $2, reason = $3, paused_by = $4
"""
_CLEAR = """
update shared.delivery_pause
set since = null, until = null, reason = null, paused_by = null, resumed_at = $1
"""
_NOTIFY = "select pg_notify($1, '')"


@dataclass(frozen=True, slots=True)
class Pause:
    """The switch as stored: `since` None when not paused."""

    since: datetime | None = None
    until: datetime | None = None
    reason: str | None = None
    by: str | None = None
    resumed_at: datetime | None = None

    def active(self, now: datetime) -> bool:
        """Paused at `now`: a pause whose `until` came is over, resumed or not yet."""
        return self.since is not None and (self.until is None or now < self.until)

    def expired(self, now: datetime) -> bool:
        """Paused in the row, but its `until` came: `deliveries.resumed` is still due."""
        return self.since is not None and self.until is not None and now >= self.until

    def ended_at(self, now: datetime) -> datetime | None:
        """When the last pause ended, as of `now` (None: never, or paused now)."""
        if self.expired(now):
            return self.until
        return None if self.since is not None else self.resumed_at


def _pause(row: asyncpg.Record | None) -> Pause:
    if row is None:  # the migration inserts the row; an empty table is "not paused"
        return Pause()
    return Pause(row["since"], row["until"], row["reason"], row["paused_by"], row["resumed_at"])


async def current(conn: asyncpg.Connection | asyncpg.Pool) -> Pause:
    """The switch as last committed, without a lock (queries, the watchdog)."""
    return _pause(await conn.fetchrow(_READ))


async def deciding(conn: asyncpg.Connection) -> Pause:
    """The switch, share-locked to the end of the caller's transaction: call it before
    deciding whether to request deliveries, so a pause waits for the decision."""
    return _pause(await conn.fetchrow(_SHARE))


async def locked(conn: asyncpg.Connection) -> Pause:
    """The switch, locked for a change to the end of the caller's transaction."""
    return _pause(await conn.fetchrow(_LOCK))


async def end_expired(
    conn: asyncpg.Connection, now: datetime, *, actor: str = "scheduler"
) -> Pause:
    """In the caller's transaction: if the pause's `until` came, clear it and append its
    `deliveries.resumed` (automatic, at `until`; `actor`: whose transaction found it due).
    Returns the switch as it is after, locked."""
    pause = await locked(conn)
    if not pause.expired(now):
        return pause
    assert pause.since is not None and pause.until is not None
    resumed = DeliveriesResumed(
        since=iso(pause.since), resumed_at=iso(pause.until), automatic=True, by=None
    )
    await resume(conn, resumed, pause.until, actor=actor, now=now)
    return Pause(resumed_at=pause.until)


async def pause(
    conn: asyncpg.Connection,
    paused: DeliveriesPaused,
    *,
    since: datetime,
    until: datetime | None,
    now: datetime,
) -> list[Event]:
    """Store a pause (the caller holds `locked`) and append its event."""
    await conn.execute(_SET, since, until, paused.reason, paused.by)
    return await _append(conn, paused, actor=paused.by, now=now)


async def resume(
    conn: asyncpg.Connection,
    resumed: DeliveriesResumed,
    at: datetime,
    *,
    actor: str,
    now: datetime,
) -> list[Event]:
    """Clear the pause (the caller holds `locked`) and append its end."""
    await conn.execute(_CLEAR, at)
    return await _append(conn, resumed, actor=actor, now=now)


async def _append(
    conn: asyncpg.Connection, payload: Payload, *, actor: str, now: datetime
) -> list[Event]:
    # The row lock orders every writer of the stream: its version cannot move meanwhile.
    version = await eventstore.stream_version(conn, PAUSE_STREAM)
    recorded = await eventstore.append(
        conn,
        PAUSE_STREAM,
        [NewEvent.of(payload)],
        expected_version=version,
        causation=Causation.new(actor=actor),
        occurred_at=now,
    )
    await conn.execute(_NOTIFY, WAKE_CHANNEL)  # delivered at commit, dropped on rollback
    return recorded
