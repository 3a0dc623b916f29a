"""A stop() cancels its loops and awaits them: the cancel must end a loop's wait even when
the event it waits for is set in the same few loop turns (a NOTIFY as the service stops).
On Python 3.11 `asyncio.wait_for` drops such a cancel (CPython gh-86296): the loop ran on
and the stop() that awaited it never returned (the in-process teardown stall)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from cronhooks_common.clock import SystemClock, wait_set
from cronhooks_common.tail import follow

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("apps", "libs", "services")


async def _forever_step() -> tuple[int, bool]:
    return 0, False


def _waiters() -> dict[str, Callable[[asyncio.Event], Awaitable[object]]]:
    clock = SystemClock()

    async def sleep_until(wake: asyncio.Event) -> None:
        while True:  # as the scheduler's loop, the watchdog, retention and the alert sink
            wake.clear()
            await clock.sleep_until(clock.now() + timedelta(seconds=60), wake)

    async def tail(wake: asyncio.Event) -> None:  # the projector, the change matcher
        await follow(_forever_step, wake, poll_seconds=60, full=None, unavailable="x")

    async def event(wake: asyncio.Event) -> None:  # the relay, the agent SDK's ticker
        while True:
            wake.clear()
            await wait_set(wake, 60)

    return {"SystemClock.sleep_until": sleep_until, "tail.follow": tail, "wait_set": event}


@pytest.mark.parametrize("waiter", list(_waiters()))
@pytest.mark.parametrize("turns", range(5))
async def test_a_cancel_just_after_the_wake_ends_the_loop(waiter: str, turns: int) -> None:
    wake = asyncio.Event()
    task = asyncio.create_task(_waiters()[waiter](wake))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)  # waiting now
    wake.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    if not done:  # what the bug did: clean up, then say so
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert done and task.cancelled(), f"{waiter} ran on after a cancel {turns} turns after its wake"


async def test_wait_set_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_set(event, 5) is True


def test_product_code_does_not_wait_with_asyncio_wait_for() -> None:
    """`asyncio.wait_for` loses a cancel on 3.11 (above): waits use
    `cronhooks_common.clock.wait_set` or `asyncio.timeout`."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in PRODUCT
        for path in sorted((ROOT / top).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"(?<!`)asyncio\.wait_for\(", line) and not line.lstrip().startswith("#")
    ]
    assert found == [], found
