"""One destination's gate (CONTRACT §17): its limits, its hold and its waiters, as pure
bookkeeping — every method takes `now` (seconds on a monotonic clock) and nothing here
waits or wakes. destination_gates.py does that for every destination of a process.

Waiters are a heap ordered by request (the event's time, then the delivery id), not by
arrival at the gate: the lookups before it run in batches that may come back out of order.
"""

from __future__ import annotations

import asyncio
import heapq
from datetime import datetime
from typing import NamedTuple


class Waiter(NamedTuple):
    """A delivery waiting at a gate, ordered by its request (`arrival` breaks ties, so a
    future is never compared)."""

    requested_at: datetime
    delivery_id: int
    arrival: int
    future: asyncio.Future[None]


class Gate:
    """One destination's limits and queue (see the module doc). While `held_until` is
    set nothing starts; `Destinations` clears it when the hold ends."""

    __slots__ = (
        "destination",
        "held_until",
        "holding",
        "in_flight",
        "interval",
        "max_concurrent",
        "next_start",
        "timer",
        "waiters",
        "waiting",
    )

    def __init__(self, destination: str, max_concurrent: int, interval: float) -> None:
        self.destination = destination
        self.max_concurrent = max_concurrent
        self.interval = interval  # seconds between starts; 0: no rate limit
        self.in_flight = 0
        self.waiters: list[Waiter] = []  # a heap: the earliest request first
        self.waiting = 0  # deliveries waiting (cancelled futures may linger in `waiters`)
        self.next_start = 0.0  # the rate's next free start
        self.held_until: datetime | None = None  # a Retry-After hold, on the service's clock
        self.holding: asyncio.Task[None] | None = None  # ends the hold when its time comes
        self.timer: asyncio.TimerHandle | None = None

    def try_take(self, now: float) -> bool:
        """Take a slot at once if nobody waits and every limit allows it."""
        if (
            self.waiters
            or self.in_flight >= self.max_concurrent
            or self.held_until is not None
            or now < self.next_start
        ):
            return False
        self._take(now)
        return True

    def _take(self, now: float) -> None:
        self.in_flight += 1
        if self.interval:
            self.next_start = max(now, self.next_start) + self.interval

    def pump(self, now: float) -> float | None:
        """Grant slots to waiters in order while the limits allow; the seconds until the
        rate lets the next one go, None when only a release or a hold's end can (or
        nobody waits)."""
        waiters = self.waiters
        while waiters and self.in_flight < self.max_concurrent and self.held_until is None:
            if now < self.next_start:
                return self.next_start - now
            future = heapq.heappop(waiters).future
            if future.done():  # its delivery was cancelled (a stop) while it waited
                continue
            self._take(now)
            future.set_result(None)
        return None

    def idle(self, now: float) -> bool:
        return (
            not self.in_flight
            and not self.waiters
            and self.held_until is None
            and self.next_start <= now
            and self.timer is None
        )
