"""The dispatcher's destination limits in one process (destination_gates.py): waits in
request order,
concurrency, rate spacing and holds. Gate is pure (time is an argument); Destinations is
run on the event loop, holds on a manual clock."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY

from cronhooks_common.clock import ManualClock
from cronhooks_common.destination_state import Limit, State, Waiting
from cronhooks_dispatcher.destination_gate import Gate, Waiter
from cronhooks_dispatcher.destination_gates import Destinations, Slot
from cronhooks_dispatcher.destination_waits import LONG_WAIT, Held

URL = "https://agent.example/hook"
KEY = "https://agent.example:443"
T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
IDS = itertools.count(1)  # delivery ids


def waiter(loop: asyncio.AbstractEventLoop, gate: Gate) -> asyncio.Future[None]:
    future: asyncio.Future[None] = loop.create_future()
    delivery_id = next(IDS)
    heapq.heappush(gate.waiters, Waiter(T0, delivery_id, delivery_id, future))
    return future


async def test_a_gate_lets_waiters_go_in_order_as_slots_free() -> None:
    loop = asyncio.get_running_loop()
    gate = Gate(KEY, max_concurrent=2, interval=0.0)
    assert gate.try_take(0.0) and gate.try_take(0.0)
    assert not gate.try_take(0.0)
    first, second = waiter(loop, gate), waiter(loop, gate)
    assert not gate.try_take(0.0)  # nobody overtakes those who wait
    assert gate.pump(0.0) is None and not first.done()
    gate.in_flight -= 1
    assert gate.pump(0.0) is None
    assert first.done() and not second.done()
    gate.in_flight -= 1
    gate.pump(0.0)
    assert second.done() and gate.in_flight == 2


async def test_rate_spaces_starts() -> None:
    loop = asyncio.get_running_loop()
    gate = Gate(KEY, max_concurrent=100, interval=0.25)  # 4 per second
    assert gate.try_take(10.0)
    assert not gate.try_take(10.1)
    later = waiter(loop, gate)
    delay = gate.pump(10.1)
    assert delay is not None and abs(delay - 0.15) < 1e-9
    assert gate.pump(10.25) is None and later.done()
    assert gate.next_start == 10.5
    # an idle stretch does not bank starts: the next goes at once, the one after waits
    assert gate.try_take(20.0) and not gate.try_take(20.0)


async def test_a_hold_stops_everything_until_it_is_lifted() -> None:
    loop = asyncio.get_running_loop()
    gate = Gate(KEY, max_concurrent=5, interval=0.0)
    gate.held_until = T0
    assert not gate.try_take(0.0)
    held = waiter(loop, gate)
    assert gate.pump(0.0) is None and not held.done()
    gate.held_until = None
    assert gate.pump(0.0) is None and held.done()


async def test_a_cancelled_waiter_is_passed_over() -> None:
    loop = asyncio.get_running_loop()
    gate = Gate(KEY, max_concurrent=1, interval=0.0)
    assert gate.try_take(0.0)
    gone, next_one = waiter(loop, gate), waiter(loop, gate)
    gone.cancel()
    gate.in_flight -= 1
    gate.pump(0.0)
    assert next_one.done() and not next_one.cancelled() and gate.in_flight == 1


async def test_deliveries_wait_in_request_order_never_more_than_the_limit() -> None:
    gates = Destinations(100, ManualClock(T0))
    gates.apply(State({KEY: Limit(KEY, 2, None)}, {}))
    started: list[int] = []
    in_flight = peak = 0

    async def deliver(n: int) -> None:
        nonlocal in_flight, peak
        gate = await gates.acquire(URL, next(IDS), T0)
        started.append(n)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01 * (3 - n % 3))  # unequal durations
        in_flight -= 1
        gates.release(gate)

    tasks = [asyncio.create_task(deliver(n)) for n in range(10)]
    await asyncio.sleep(0.005)
    assert gates.waiting() == {KEY: 8}
    assert _waiting_metric(KEY) == 8
    await asyncio.gather(*tasks)
    assert started == list(range(10)) and peak == 2
    assert gates.waiting() == {} and _waiting_metric(KEY) is None


async def test_waiters_go_in_request_order_whatever_order_they_reach_the_gate() -> None:
    # The lookups before the gate run in batches that may come back out of order: the
    # request's time decides, then the delivery id (a retry of an old delivery is a later
    # request, and goes after the newer deliveries requested before it).
    gates = Destinations(1, ManualClock(T0))
    first = await gates.acquire(URL, 1, T0)
    at = [  # (delivery id, seconds after T0), in the order they reach the gate
        (40, 3),
        (20, 1),
        (10, 1),
        (2, 4),  # delivery 2's retry
        (30, 2),
    ]
    started: list[int] = []

    async def deliver(delivery_id: int, seconds: int) -> None:
        slot = await gates.acquire(URL, delivery_id, T0 + timedelta(seconds=seconds))
        started.append(delivery_id)
        await asyncio.sleep(0)
        gates.release(slot)

    tasks = []
    for delivery_id, seconds in at:
        tasks.append(asyncio.create_task(deliver(delivery_id, seconds)))
        await asyncio.sleep(0)  # reaches the gate before the next one
    assert gates.waiting() == {KEY: 5}
    gates.release(first)
    await asyncio.gather(*tasks)
    assert started == [10, 20, 30, 40, 2]


async def test_rate_limit_in_real_time() -> None:
    gates = Destinations(100, ManualClock(T0))
    gates.apply(State({KEY: Limit(KEY, None, 20.0)}, {}))
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def deliver() -> None:
        gate = await gates.acquire(URL, next(IDS), T0)
        times.append(loop.time())
        gates.release(gate)

    await asyncio.gather(*(deliver() for _ in range(5)))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap >= 0.045 for gap in gaps), gaps


async def test_a_hold_from_postgres_and_a_raised_limit_apply_at_once() -> None:
    clock = ManualClock(T0)
    gates = Destinations(1, clock)
    other = "https://other.example/x"
    first = await gates.acquire(URL, next(IDS), T0)
    waiting = asyncio.create_task(gates.acquire(URL, next(IDS), T0))
    await asyncio.sleep(0)
    assert not waiting.done()
    gates.apply(State({KEY: Limit(KEY, 2, None)}, {}))  # raised: the waiter goes
    await asyncio.sleep(0)
    assert waiting.done()
    gates.release(first)
    gates.release(waiting.result())
    # another replica's hold, read from Postgres: for this destination only, until T0 + 60 s
    gates.apply(State({}, {KEY: T0 + timedelta(seconds=60)}))
    gates.release(await gates.acquire(other, next(IDS), T0))
    held = [asyncio.create_task(gates.acquire(URL, next(IDS), T0)) for _ in range(3)]
    clock.advance(timedelta(seconds=59))
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in held) and gates.waiting() == {KEY: 3}
    gates.hold(KEY, T0 + timedelta(seconds=30))  # an earlier end never shortens it
    clock.advance(timedelta(seconds=1))
    for task in held:  # one at a time (the default limit here is 1), in order
        gates.release(await task)
    assert gates.waiting() == {}


async def test_a_hold_that_is_lengthened_waits_for_its_new_end() -> None:
    clock = ManualClock(T0)
    gates = Destinations(5, clock)
    gates.hold(KEY, T0 + timedelta(seconds=10))
    held = asyncio.create_task(gates.acquire(URL, next(IDS), T0))
    gates.hold(KEY, T0 + timedelta(seconds=20))
    clock.advance(timedelta(seconds=10))
    await asyncio.sleep(0.05)
    assert not held.done()
    clock.advance(timedelta(seconds=10))
    gates.release(await held)
    await gates.close()


async def test_a_cancelled_delivery_gives_its_place_back() -> None:
    gates = Destinations(1, ManualClock(T0))
    held = await gates.acquire(URL, next(IDS), T0)
    gone = asyncio.create_task(gates.acquire(URL, next(IDS), T0))
    after = asyncio.create_task(gates.acquire(URL, next(IDS), T0))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    gates.release(held)
    slot = await after
    assert slot.gate.in_flight == 1 and gates.waiting() == {}
    gates.release(slot)


def _finished(gates: Destinations, slot: Slot) -> None:
    """A delivery's answer is in and its outcome stored."""
    gates.release(slot)
    gates.recorded(slot)


def _waiting_metric(destination: str) -> float | None:
    return REGISTRY.get_sample_value("cronhooks_destination_waiting", {"destination": destination})


async def test_a_stop_gives_waiting_deliveries_back_at_once() -> None:
    clock = ManualClock(T0)
    gates = Destinations(5, clock)
    gates.hold(KEY, T0 + timedelta(hours=1))
    waiting = [asyncio.create_task(gates.acquire(URL, next(IDS), T0)) for _ in range(3)]
    await asyncio.sleep(0)
    gates.give_back()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert gates.waiting() == {}
    late = asyncio.create_task(gates.acquire(URL, next(IDS), T0))
    with contextlib.suppress(asyncio.CancelledError):
        await late
    assert late.cancelled()
    await gates.close()


async def test_what_waits_is_told_with_the_long_held_deliveries_by_id() -> None:
    clock = ManualClock(T0)
    gates = Destinations(1, clock)
    sending = await gates.acquire(URL, 7, T0)  # in flight, then held long
    waiting = asyncio.create_task(gates.acquire(URL, 8, T0))
    await asyncio.sleep(0)
    assert gates.waiting_now() == {KEY: Waiting(1)}  # nothing held long yet
    clock.advance(LONG_WAIT)
    late = asyncio.create_task(gates.acquire(URL, 9, clock.now()))  # waits, not long yet
    await asyncio.sleep(0)
    assert gates.waiting_now() == {KEY: Waiting(2, (7, 8))}
    gates.release(sending)  # 7's answer is in: 8 is sent now; 9 waits on
    sent = await waiting
    # until its outcome is stored a delivery is still held (the watchdog must not take it)
    assert gates.waiting_now() == {KEY: Waiting(1, (7, 8))}
    gates.recorded(sending)  # 7's outcome is stored; 8 is still held long
    assert gates.waiting_now() == {KEY: Waiting(1, (8,))}
    _finished(gates, sent)
    last = await late
    _finished(gates, last)
    assert gates.waiting_now() == {}
    # a wait that ends by a stop is forgotten too
    gates.hold(KEY, T0 + timedelta(hours=1))
    stopped = asyncio.create_task(gates.acquire(URL, 10, T0))
    await asyncio.sleep(0)
    clock.advance(LONG_WAIT)
    assert gates.waiting_now() == {KEY: Waiting(1, (10,))}
    gates.give_back()
    with contextlib.suppress(asyncio.CancelledError):
        await stopped
    assert gates.waiting_now() == {}
    await gates.close()


def test_a_delivery_held_again_counts_from_its_latest_hold() -> None:
    held = Held()
    held.add(1, T0, KEY)
    held.add(2, T0 + timedelta(seconds=1), KEY)
    held.add(1, T0 + timedelta(seconds=5), KEY)  # a redelivered message, handled again
    assert held.long(T0 + timedelta(seconds=2)) == {KEY: [2]}
    assert held.long(T0 + timedelta(seconds=5)) == {KEY: [1, 2]}


async def test_a_delivery_requested_long_ago_is_told_at_once() -> None:
    # The watchdog's deadline runs from the request: a delivery whose message sat in the
    # queue before it reached this process has used part of it up, and is told as held
    # long as soon as its request is older than LONG_WAIT, even behind a recent one.
    clock = ManualClock(T0 + LONG_WAIT)
    gates = Destinations(1, clock)
    recent = await gates.acquire(URL, 1, clock.now())
    stale = asyncio.create_task(gates.acquire(URL, 2, T0 - timedelta(seconds=1)))
    await asyncio.sleep(0)
    assert gates.waiting_now() == {KEY: Waiting(1, (2,))}
    _finished(gates, recent)
    slot = await stale
    _finished(gates, slot)
    assert gates.waiting_now() == {}
    # A request time ahead of this process's clock (another service's clock) counts from now.
    ahead = await gates.acquire(URL, 3, clock.now() + timedelta(minutes=5))
    clock.advance(LONG_WAIT)
    assert gates.waiting_now() == {KEY: Waiting(0, (3,))}
    _finished(gates, ahead)
