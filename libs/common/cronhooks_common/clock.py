"""Time as a parameter: the real clock for services, a controllable one for tests.

Only composition roots create a `SystemClock`; everything else receives a `Clock`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        """Return at `deadline` (None: never) or as soon as `wake` is set, whichever is first."""


class SystemClock:
    """Wall-clock time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        timeout = None if deadline is None else (deadline - self.now()).total_seconds()
        if timeout is not None and timeout <= 0:
            return
        await wait_set(wake, timeout)


class ManualClock:
    """A clock that moves only when told to; sleepers wake when it passes their deadline."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._tick = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        self._now = utc(when)
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    def advance(self, delta: timedelta) -> None:
        self.set(self._now + delta)

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        while not wake.is_set() and (deadline is None or self._now < deadline):
            waits = {asyncio.ensure_future(self._tick.wait()), asyncio.ensure_future(wake.wait())}
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()


async def wait_set(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until `event` is set (True) or `timeout` seconds have passed (False; None:
    no limit). A cancel of the waiting task always ends the wait.

    Not `asyncio.wait_for(event.wait(), timeout)`: on Python 3.11 that returns normally
    when the waiting task is cancelled in the few loop turns between the event being set
    and the wait resuming (it returns the inner result instead of raising the
    cancellation; CPython gh-86296, rewritten in 3.12). A loop that waits so, cancelled by
    its stop() just as a NOTIFY sets its event, loses the cancel and runs on, and the
    stop() that awaits it never returns. `asyncio.timeout` counts cancels: a cancel from
    outside is never taken for its own timeout, nor dropped."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


def utc(dt: datetime) -> datetime:
    """`dt` as aware UTC; naive datetimes are taken to be UTC already."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def iso(dt: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a Z, the format of every timestamp we emit."""
    return utc(dt).isoformat(timespec="milliseconds").replace("+00:00", "Z")
