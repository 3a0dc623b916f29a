"""A notice's event that waits `waited_aside` (cronhooks_common.consumer_notices) gives its
slot to the next event meanwhile and takes one again before it goes on: the dispatcher's
deliveries waiting for a destination never hold up those bound elsewhere."""

from __future__ import annotations

import asyncio

from cronhooks_common import consumer_notices
from cronhooks_common.consumer import waited_aside


async def test_a_waiting_event_lends_its_slot() -> None:
    slots = asyncio.Semaphore(1)
    released = asyncio.Event()
    order: list[str] = []

    async def waiting() -> None:
        slot = consumer_notices._Slot(slots)
        await slot.take()
        consumer_notices._SLOT.set(slot)
        order.append("waiting: in")
        await waited_aside(released.wait())
        order.append("waiting: on again")
        slot.give()

    async def other() -> None:
        async with slots:
            order.append("other: ran")
            released.set()

    await asyncio.gather(waiting(), other())
    assert order == ["waiting: in", "other: ran", "waiting: on again"]
    assert not slots.locked()  # every slot given back once


async def test_cancelled_while_taking_its_slot_again_it_holds_none() -> None:
    slots = asyncio.Semaphore(1)
    stepped = asyncio.Event()
    slot = consumer_notices._Slot(slots)

    async def waiting() -> None:
        await slot.take()
        consumer_notices._SLOT.set(slot)
        async def step() -> None:
            stepped.set()
            await asyncio.sleep(0)

        try:
            await waited_aside(step())
        finally:
            if slot.held:  # as Notices._one does
                slot.give()

    task = asyncio.create_task(waiting())
    await stepped.wait()
    async with slots:  # another event has the one slot when the waiter wants it back
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and not slot.held
    assert not slots.locked() and slots._value == 1  # given back exactly once


async def test_outside_a_notice_it_is_a_plain_wait() -> None:
    assert await waited_aside(asyncio.sleep(0, result="waited")) == "waited"
