"""Read the event store in commit order, without skipping anything (the relay's trap).

Used by admin-api's projector and the importer's change matcher.

Positions are handed out at insert, not at commit: transaction A takes position 10, B
takes 11 and commits first; a reader that has seen 11 and remembers "after 11" never sees
A's 10. So the reader does not go by position alone. Every event records the id of the
transaction that wrote it (`txid`, migration 0004 of the event store), and the reader only
takes events whose transaction id is below the snapshot's xmin — the oldest transaction
still running. Every transaction below it has finished, so all it wrote is visible now and
nothing below the watermark can appear later. Reading in (txid, position) order from a
(txid, position) checkpoint therefore never skips an event and never reads one twice.

An event committed after a still-running older transaction waits until that transaction
ends (`held_back` says so, so the caller can look again soon instead of sleeping long).

A reader that wants only streams kept forever (the change matcher: webhooks and notes)
tails the `kept` partition alone (`table=KEPT_EVENTS`): it then neither plans the delivery
buckets' partitions nor scans past their events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import structlog

from cronhooks_common import db
from cronhooks_common.clock import wait_set
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import Event
from cronhooks_common.eventstore import EVENT_COLUMNS, event_from_row, probe_sql
from cronhooks_common.relay import NOTIFY_CHANNEL

log = structlog.get_logger(__name__)

WATERMARK = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"


@dataclass(frozen=True, slots=True, order=True)
class Checkpoint:
    txid: int
    position: int


START = Checkpoint(0, 0)
ALL_EVENTS = "eventstore.events"
KEPT_EVENTS = "eventstore.events_kept"  # the streams kept forever (see buckets.py)

_READ = f"""
select txid, position, {EVENT_COLUMNS} from {{table}}
where (txid, position) > ($1, $2) and txid < {WATERMARK}
order by txid, position
limit $3
"""
# A reader that wants a few types scans the window light (type only) and fetches the
# wanted rows in full: its checkpoint then moves past the unwanted ones too. (Filtering
# by type in the read itself left the checkpoint at the last wanted event, so each read
# of a herd scanned again every delivery event since the last note.)
_SCAN = f"""
select txid, position, type from {{table}}
where (txid, position) > ($1, $2) and txid < {WATERMARK}
order by txid, position
limit $3
"""


def _by_position(table: str) -> str:
    # An index probe per wanted position (eventstore.probe_sql says why not `= any`).
    columns = f"txid, position, {EVENT_COLUMNS}"
    return probe_sql(table, "position", "bigint", columns=columns) + " order by txid, position"


# The rest of one transaction's events after a position (it has committed: it was read).
_REST = f"""
select txid, position, {EVENT_COLUMNS} from {{table}}
where txid = $1 and position > $2 and type = any($3::text[])
order by position
"""

# A checkpoint's txid was below the watermark when it was read, and the watermark only
# rises, so "after the checkpoint and at or above the watermark" is simply "at or above
# the watermark". Asked as the smallest such txid, the plan is one index seek whatever
# the statistics say: as "exists (... (txid, position) > ($1, $2) and txid >= watermark)"
# the prepared statement's generic plan scanned the whole table (10-18 ms a call, 300
# calls in a 10,000 herd).
_HELD_BACK = f"""
select min(txid) is not null from {{table}}
where txid > $1 and txid >= {WATERMARK}
"""


async def read_after(
    conn: asyncpg.Connection, after: Checkpoint, limit: int, *, table: str = ALL_EVENTS
) -> tuple[list[Event], Checkpoint]:
    """The next committed events after `after`, in (txid, position) order, and the
    checkpoint of the last one (`after` if there were none)."""
    rows = await conn.fetch(_READ.format(table=table), after.txid, after.position, limit)
    return events_after(rows, after)


async def scan_after(
    conn: asyncpg.Connection,
    after: Checkpoint,
    limit: int,
    *,
    types: Sequence[str],
    table: str = ALL_EVENTS,
) -> tuple[list[Event], Checkpoint, int]:
    """The committed events of `types` among the next `limit` events after `after`, the
    checkpoint of the last event scanned (wanted or not), and how many were scanned."""
    window = await conn.fetch(_SCAN.format(table=table), after.txid, after.position, limit)
    if not window:
        return [], after, 0
    last = Checkpoint(window[-1]["txid"], window[-1]["position"])
    wanted = set(types)
    positions = [r["position"] for r in window if r["type"] in wanted]
    rows = await conn.fetch(_by_position(table), positions) if positions else []
    return [event_from_row(r) for r in rows], last, len(window)


async def read_rest_of(
    conn: asyncpg.Connection, at: Checkpoint, *, types: Sequence[str], table: str = ALL_EVENTS
) -> tuple[list[Event], Checkpoint]:
    """The events of transaction `at.txid` after `at` (a read that stopped at its limit
    inside a transaction completes it with this), and the checkpoint of the last."""
    rows = await conn.fetch(_REST.format(table=table), at.txid, at.position, list(types))
    return events_after(rows, at)


def events_after(rows: list[asyncpg.Record], after: Checkpoint) -> tuple[list[Event], Checkpoint]:
    """The events of rows read in (txid, position) order after `after`, and the checkpoint
    of the last (`after` if there were none)."""
    if not rows:
        return [], after
    return [event_from_row(r) for r in rows], Checkpoint(rows[-1]["txid"], rows[-1]["position"])


async def held_back(
    conn: asyncpg.Connection, after: Checkpoint, *, table: str = ALL_EVENTS
) -> bool:
    """Committed events after `after` wait for an older transaction still running."""
    return bool(await conn.fetchval(_HELD_BACK.format(table=table), after.txid))


HELD_BACK_FIRST = 0.005


async def follow(
    step: Callable[[], Awaitable[tuple[int, bool]]],
    wake: asyncio.Event,
    *,
    poll_seconds: float,
    full: int | None,
    unavailable: str,
) -> None:
    """Run a tail reader's `step` for ever: it reads one batch and answers (events read,
    whether committed events wait behind an older transaction). Read again at once after
    a full batch (`full` events; None: after any); look again soon, backing off, while
    events are held back; else sleep until `wake` (NOTIFY at every append) or the poll.
    A database that is gone is waited for, with backoff."""
    delay, patience = 0.2, HELD_BACK_FIRST
    while True:
        try:
            read, waiting = await step()
            delay = 0.2
        except TRANSIENT_DB_ERRORS as exc:
            log.warning(unavailable, error=repr(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if read:
            patience = HELD_BACK_FIRST
            if full is None or read >= full:
                continue  # more may be there already
        if waiting:
            # An older transaction is about to finish, usually; one left open for long
            # (a stuck session) must not make us spin: back off.
            await asyncio.sleep(patience)
            patience = min(patience * 2, poll_seconds)
            continue
        wake.clear()
        await wait_set(wake, poll_seconds)  # not wait_for: a stop's cancel must end it


class TailLoop:
    """A tail reader's life: `step` run by `follow`, woken by the outbox NOTIFY (relay.py)
    at every append and by the poll otherwise, from `start` until `stop`."""

    def __init__(
        self,
        step: Callable[[], Awaitable[tuple[int, bool]]],
        dsn: str,
        *,
        name: str,
        poll_seconds: float,
        full: int | None,
        unavailable: str,
    ) -> None:
        self.wake = asyncio.Event()  # set it to read at once
        self._step = step
        self._dsn = dsn
        self._name = name
        self._poll_seconds = poll_seconds
        self._full = full
        self._unavailable = unavailable
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        listen = db.wake_on_notify(self._dsn, NOTIFY_CHANNEL, self.wake, name=self._name)
        run = follow(
            self._step,
            self.wake,
            poll_seconds=self._poll_seconds,
            full=self._full,
            unavailable=self._unavailable,
        )
        self._tasks = [asyncio.create_task(listen), asyncio.create_task(run)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
