from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from cronhooks_common.clock import ManualClock, iso


async def test_manual_clock_wakes_sleepers_when_moved_past_deadline() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    wake = asyncio.Event()
    sleeper = asyncio.create_task(clock.sleep_until(clock.now() + timedelta(seconds=60), wake))
    await asyncio.sleep(0.01)
    clock.advance(timedelta(seconds=30))
    await asyncio.sleep(0.01)
    assert not sleeper.done()
    clock.advance(timedelta(seconds=30))
    await asyncio.wait_for(sleeper, 1)


async def test_manual_clock_sleep_ends_on_wake() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    wake = asyncio.Event()
    sleeper = asyncio.create_task(clock.sleep_until(None, wake))
    await asyncio.sleep(0.01)
    wake.set()
    await asyncio.wait_for(sleeper, 1)


def test_iso_is_utc_with_z() -> None:
    assert iso(datetime(2026, 2, 9, 9, 0, tzinfo=UTC)) == "2026-02-09T09:00:00.000Z"
