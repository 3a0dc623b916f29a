"""Destination limits in one dispatcher process (CONTRACT §17): at most `max_concurrent`
requests in flight to a destination (`scheme://host:port`), at most `max_per_second`
started per second, none while a `Retry-After` holds it. A delivery over a limit waits in
request order and never fails because of it (destination_gate.py keeps one destination's
limits and its waiters, in the order of their requests).

The hot path is what a herd pays per delivery: the destination of its URL (cached per
URL), a dict lookup, `Gate.try_take` — a few comparisons when nobody waits — its entry
in `Held` and its `Slot`; no query. Only a delivery that must wait makes a future, and
it waits `waited_aside` (cronhooks_common.consumer): its consumer slot goes to other
events meanwhile, so deliveries to other destinations go on.

Limits and holds come from Postgres (destination_sync.py calls `apply`); a hold this
process got itself applies at once (`hold`). What waits here goes the other way
(`waiting_now`, told every half second): the page shows it, and the scheduler's watchdog
must not take a delivery that waits its turn here for a lost one (`LONG_WAIT`).

Concurrency and rate run on the event loop's clock (a `time` function for tests); a hold
is an instant of the service's clock, waited for with it (`Clock.sleep_until`), so a
test's manual clock ends holds as it ends retries; how long a delivery has been held here
is counted on the service's clock too, as the watchdog's deadlines are.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import datetime

import structlog

from cronhooks_common.clock import Clock
from cronhooks_common.consumer import waited_aside
from cronhooks_common.destination_key import destination_of
from cronhooks_common.destination_state import Limit, State, Waiting
from cronhooks_dispatcher.destination_gate import Gate, Waiter
from cronhooks_dispatcher.destination_waits import LONG_WAIT, WAITING, Held, told

log = structlog.get_logger(__name__)

# Idle gates without an override or a hold are dropped after this many `apply` calls
# (half a second apart): a process that once sent to many hosts keeps no state for them.
PRUNE_EVERY = 120


class Slot:
    """A delivery's place at its destination, from `acquire` to `release`."""

    __slots__ = ("delivery_id", "gate")

    def __init__(self, delivery_id: int, gate: Gate) -> None:
        self.delivery_id = delivery_id
        self.gate = gate


class Destinations:
    """Every destination's gate in this process: `acquire` before a request, `release`
    after its answer."""

    def __init__(
        self, default_concurrency: int, clock: Clock, *, time: Callable[[], float] | None = None
    ) -> None:
        self.default_concurrency = default_concurrency
        self._clock = clock
        self._time = time or asyncio.get_running_loop().time
        self._gates: dict[str, Gate] = {}
        self._limits: dict[str, Limit] = {}
        self._applied = 0
        self._giving_back = False
        self._arrivals = itertools.count()
        self._held = Held()
        WAITING.sources.add(self)

    def gate(self, url: str) -> Gate:
        key = destination_of(url)
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = Gate(key, *self._limit_of(key))
        return gate

    async def acquire(self, url: str, delivery_id: int, requested_at: datetime) -> Slot:
        """A slot for a request to `url`'s destination made at `requested_at`, in
        request order; waits as long as the limits and holds say, and never fails because
        of them. The delivery is held here until `recorded`."""
        gate = self.gate(url)
        # Held since its request, or since now if the request's time is ahead of this
        # clock: the watchdog's deadline runs from the request, so a message that sat in
        # the queue before it came here has used up part of it already.
        self._held.add(delivery_id, min(requested_at, self._clock.now()), gate.destination)
        try:
            await self._take(gate, requested_at, delivery_id)
        except BaseException:
            self._held.drop(delivery_id)
            raise
        return Slot(delivery_id, gate)

    async def _take(self, gate: Gate, requested_at: datetime, delivery_id: int) -> None:
        if gate.try_take(self._time()):
            return
        if self._giving_back:
            raise asyncio.CancelledError  # stopping: back to the queue, see `give_back`
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = Waiter(requested_at, delivery_id, next(self._arrivals), future)
        heapq.heappush(gate.waiters, waiter)
        gate.waiting += 1
        try:
            self._pump(gate)
            if not future.done():
                await waited_aside(future)
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._free(gate)  # granted, but its delivery stops: the slot goes on
            else:
                future.cancel()
            raise
        finally:
            gate.waiting -= 1

    def release(self, slot: Slot) -> None:
        """The answer is in: the destination's slot goes to the next request."""
        self._free(slot.gate)

    def recorded(self, slot: Slot) -> None:
        """The attempt's outcome is stored: the delivery is no longer held here (until
        then the watchdog must not take it for lost, see `waiting_now`)."""
        self._held.drop(slot.delivery_id)

    def _free(self, gate: Gate) -> None:
        gate.in_flight -= 1
        if gate.waiters:
            self._pump(gate)

    def hold(self, destination: str, until: datetime) -> None:
        """Hold `destination` until `until` or longer, at once."""
        gate = self._gates.get(destination)
        if gate is None:
            gate = self._gates[destination] = Gate(destination, *self._limit_of(destination))
        if gate.held_until is None or until > gate.held_until:
            gate.held_until = until
        if gate.holding is None:
            gate.holding = asyncio.create_task(self._end_hold(gate))

    def apply(self, state: State) -> None:
        """The limits and holds Postgres holds now (destination_sync.py)."""
        now = self._time()
        self._limits = state.limits
        for destination, until in state.holds.items():
            self.hold(destination, until)
        for gate in self._gates.values():
            gate.max_concurrent, gate.interval = self._limit_of(gate.destination)
            if gate.waiters:  # a raised limit or a hold that ended lets them go now
                self._repump(gate)
        self._applied += 1
        if self._applied % PRUNE_EVERY == 0:
            self._prune(now)

    def give_back(self) -> None:
        """At a stop: every delivery waiting here (and any that would wait) ends as a
        cancelled one does, its message unacked, so it goes back to the queue for another
        replica or the next start, at once. A stop waits for the requests in flight, not
        for a hold of up to an hour."""
        self._giving_back = True
        for gate in self._gates.values():
            for waiter in gate.waiters:
                waiter.future.cancel()
            gate.waiters.clear()

    async def close(self) -> None:
        holding = [g.holding for g in self._gates.values() if g.holding is not None]
        for task in holding:
            task.cancel()
        await asyncio.gather(*holding, return_exceptions=True)

    def waiting(self) -> dict[str, int]:
        """Deliveries waiting per destination (only those with any)."""
        return {key: g.waiting for key, g in self._gates.items() if g.waiting}

    def waiting_now(self) -> dict[str, Waiting]:
        """What waits here per destination, and the deliveries held here (waiting, in
        flight, or their outcome being stored) whose request is older than LONG_WAIT:
        what destination_sync.py tells."""
        return told(self.waiting(), self._held.long(self._clock.now() - LONG_WAIT))

    def _limit_of(self, destination: str) -> tuple[int, float]:
        limit = self._limits.get(destination)
        if limit is None:
            return self.default_concurrency, 0.0
        rate = limit.max_per_second
        return limit.max_concurrent or self.default_concurrency, 1.0 / rate if rate else 0.0

    async def _end_hold(self, gate: Gate) -> None:
        """Wait for the hold's end (a later hold moves it: waited for in turn), then let
        the waiters go."""
        never = asyncio.Event()
        try:
            while gate.held_until is not None and self._clock.now() < gate.held_until:
                await self._clock.sleep_until(gate.held_until, never)
        finally:
            gate.holding = None
        gate.held_until = None
        log.info("destination_hold_ended", destination=gate.destination)
        self._repump(gate)

    def _pump(self, gate: Gate) -> None:
        delay = gate.pump(self._time())
        if delay is not None and gate.timer is None:
            gate.timer = asyncio.get_running_loop().call_later(delay, self._wake, gate)

    def _wake(self, gate: Gate) -> None:
        gate.timer = None
        self._pump(gate)

    def _repump(self, gate: Gate) -> None:
        if gate.timer is not None:
            gate.timer.cancel()
            gate.timer = None
        self._pump(gate)

    def _prune(self, now: float) -> None:
        for key in [k for k, g in self._gates.items() if g.idle(now) and k not in self._limits]:
            del self._gates[key]
