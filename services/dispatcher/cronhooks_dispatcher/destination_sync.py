"""Destination limits and holds between Postgres and this process (CONTRACT §17).

Every half second the state is read (`cronhooks_common.destination_state`, why a poll and
not LISTEN is said there) and applied to the gates, so a setDestinationLimit or another
replica's hold takes effect here within about a second. A `429`/`503` with `Retry-After`
this process gets is applied here at once and written for the others (`hold`).

The other way, each poll tells what waits here (`shared.destination_waiting`, when
anything does or did at the last poll): the page shows it, and the scheduler's watchdog
leaves alone the deliveries held here for long, which wait their turn (CONTRACT §17:
they never fail for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from datetime import datetime, timedelta

import asyncpg
import structlog

from cronhooks_common import destination_state
from cronhooks_common.clock import Clock
from cronhooks_common.destination_key import destination_of
from cronhooks_common.poison import TRANSIENT
from cronhooks_dispatcher.destination_gates import Destinations
from cronhooks_dispatcher.retry import MAX_RETRY_AFTER, retry_after

log = structlog.get_logger(__name__)

POLL_SECONDS = 0.5
HOLDING = frozenset({429, 503})
# Holds that ended this long ago are deleted (by whichever replica polls): a hold's row
# is kept a while after it ends for the admin page's history of the last hour.
FORGET_AFTER = timedelta(hours=1)
PRUNE_EVERY = 120  # polls


def process_name() -> str:
    """This process among the dispatchers' rows: host, pid and a random part (a pid is
    reused across restarts and containers)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class DestinationSync:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, destinations: Destinations) -> None:
        self._pool = pool
        self._clock = clock
        self.destinations = destinations
        self._task: asyncio.Task[None] | None = None
        self._process = process_name()
        self._told = False  # the last tell had anything in it

    async def start(self) -> None:
        """Read the state once (the first delivery already sees it), then keep polling."""
        await self.refresh()
        self._task = asyncio.create_task(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.destinations.close()
        with contextlib.suppress(Exception):  # the rows go stale by themselves anyway
            await destination_state.tell_waiting(self._pool, self._process, {})

    async def refresh(self) -> None:
        self.destinations.apply(await destination_state.read(self._pool, self._clock.now()))

    async def tell(self) -> None:
        """Tell what waits here, if anything does or did at the last tell."""
        waiting = self.destinations.waiting_now()
        if waiting or self._told:
            await destination_state.tell_waiting(self._pool, self._process, waiting)
            self._told = bool(waiting)

    async def hold(self, url: str, status: int | None, header: str | None) -> datetime | None:
        """After an answer: a 429/503 whose Retry-After asks for a wait holds the URL's
        destination until then (at most an hour): here at once, in Postgres for every
        replica. Returns the end of the hold, None when the answer asks for none."""
        if status not in HOLDING or not header:
            return None
        now = self._clock.now()
        wait = retry_after(header, now)
        if not wait:  # unreadable, past, or 0: nothing to hold
            return None
        wait = min(wait, MAX_RETRY_AFTER)
        destination = destination_of(url)
        self.destinations.hold(destination, now + wait)
        assert status is not None
        try:
            await destination_state.hold(
                self._pool, destination, now + wait, status=status, now=now
            )
        except TRANSIENT as exc:
            # This process holds it already; the others learn of it when the database is
            # back and a later answer asks again. The attempt's record is what matters now.
            log.warning("destination_hold_not_written", destination=destination, error=repr(exc))
        log.info("destination_held", destination=destination, seconds=wait.total_seconds())
        return now + wait

    async def _poll(self) -> None:
        polls = 0
        while True:
            await asyncio.sleep(POLL_SECONDS)
            polls += 1
            try:
                await self.refresh()
                await self.tell()
                if polls % PRUNE_EVERY == 0:
                    await destination_state.prune(self._pool, self._clock.now() - FORGET_AFTER)
                    await destination_state.prune_waiting(self._pool)
            except Exception as exc:  # the database away: keep what was read, try again
                log.warning("destination_state_unread", error=repr(exc))
