"""How a free consumer handles a work notice (work.py): every event it names, at once.

A notice names many events bound for one consumer; its message is acked when all of them
are handled. One that keeps failing is ended by the service's `on_poison` hook if it can
be (poison.py); otherwise it dead-letters the whole notice once the others are done (they
are skipped as handled if it is ever replayed). The events in hand at once, over all
notices, are as many as the consumer has workers: the bound a free consumer keeps with
one event per message.

A handler that must wait a long time for something outside the consumer (the dispatcher's
destination limits) waits in `waited_aside()`: its slot goes to the next event meanwhile,
so events bound elsewhere keep going, and it takes a slot again before it goes on. Its
message stays unacked until it is handled, as always (prefetch bounds those).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TypeVar

import structlog
from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic

from cronhooks_common import logs, work
from cronhooks_common.acks import AckBatcher
from cronhooks_common.poison import CONSUMED, Poison, with_retries

log = structlog.get_logger(__name__)

NoticeHandler = Callable[[work.Ref], Awaitable[None]]
T = TypeVar("T")


class _Slot:
    """The consumer slot one event of a notice holds; given up while it steps aside."""

    __slots__ = ("held", "slots")

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self.slots = slots
        self.held = False

    async def take(self) -> None:
        await self.slots.acquire()  # a cancelled acquire holds nothing (asyncio's promise)
        self.held = True

    def give(self) -> None:
        self.held = False
        self.slots.release()


# The slot the current event holds (each event of a notice runs in a task of its own).
_SLOT: ContextVar[_Slot | None] = ContextVar("notice_slot", default=None)


async def waited_aside(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` without holding the event's slot (see the module doc); outside a
    notice's event, a plain await. A coroutine, not a context manager: the dispatcher
    pays this for every delivery that waits at a destination's limit."""
    slot = _SLOT.get()
    if slot is None:
        return await awaitable
    slot.give()
    try:
        return await awaitable
    finally:
        # Taken again before the event goes on; a stop that cancels it meanwhile leaves
        # the slot given (`held` says so: `_one` gives back only a slot it holds).
        await slot.take()


def is_notice(message: DeliveredMessage) -> bool:
    """True for a message from the work exchange (else it is an event)."""
    delivery = message.delivery
    return isinstance(delivery, Basic.Deliver) and delivery.exchange == work.WORK_EXCHANGE


class Notices:
    """One consumer's handling of its work notices, `workers` events at a time."""

    def __init__(
        self,
        *,
        consumer: str,
        queue: str,
        handle: NoticeHandler,
        workers: int,
        acks: AckBatcher,
        poison: Poison,
    ) -> None:
        self._consumer = consumer
        self._queue = queue
        self._handle = handle
        self._slots = asyncio.Semaphore(workers)
        self._acks = acks
        self._poison = poison

    async def run(self, message: DeliveredMessage) -> None:
        """Handle every event the notice names; ack it when all are handled, else
        dead-letter it (see the module doc)."""
        try:
            refs = work.parse(message.body)
        except (ValueError, TypeError) as exc:
            await self._poison.malformed(message, "notice_malformed", error=repr(exc))
            return
        handled = sum(await asyncio.gather(*(self._one(ref) for ref in refs)))
        CONSUMED.labels(self._consumer, "handled").inc(handled)
        if handled == len(refs):
            self._acks.ack(message)
        else:
            CONSUMED.labels(self._consumer, "dead_lettered").inc(len(refs) - handled)
            await self._acks.reject(message)

    async def _one(self, ref: work.Ref) -> bool:
        """Handle one event of a notice; True if it was handled or ended by the hook."""
        handle = self._handle
        slot = _Slot(self._slots)
        await slot.take()
        try:
            _SLOT.set(slot)
            with logs.bound(event_id=ref.event_id):
                error = await with_retries(lambda: handle(ref))
                if error is not None and await self._poison.ended(ref.event_id, ref.stream, error):
                    return True
        finally:
            if slot.held:
                slot.give()
        if error is not None:
            log.error(
                "event_dead_lettered",
                queue=self._queue,
                event_id=str(ref.event_id),
                stream=ref.stream,
                exc_info=error,
            )
        return error is None
