"""The destination gate's waiting path alone, in one process (no broker, no database, no
HTTP): N events through the consumer's 256 slots to one destination whose limit is L,
each 'answered' one loop turn after its slot at the gate. CPU µs per delivery, the best
of `repeats` runs: at L=100 almost every delivery waits (a future, the heap, its
consumer slot lent and taken back); at a limit above N none does, so the difference is
what a wait costs.

    PYTHONPATH=. .venv/bin/python -m bench.destination_wait [LIMIT ...]
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime

import uvloop

from cronhooks_common import consumer_notices
from cronhooks_common.clock import SystemClock
from cronhooks_dispatcher.destination_gates import Destinations

N = 10_000
WORKERS = 256  # the dispatcher's consumer slots
URL = "http://127.0.0.1:9/hook"


async def one_run(limit: int) -> float:
    """CPU µs per delivery of N deliveries through a gate of `limit`."""
    destinations = Destinations(limit, SystemClock())
    slots = asyncio.Semaphore(WORKERS)
    requested_at = datetime.now(UTC)

    async def event(delivery_id: int) -> None:  # as Notices._one and deliver._attempt
        slot = consumer_notices._Slot(slots)
        await slot.take()
        try:
            consumer_notices._SLOT.set(slot)
            held = await destinations.acquire(URL, delivery_id, requested_at)
            await asyncio.sleep(0)  # the request
            destinations.release(held)
            destinations.recorded(held)
        finally:
            if slot.held:
                slot.give()

    started = time.process_time()
    await asyncio.gather(*(event(i) for i in range(N)))
    return (time.process_time() - started) / N * 1e6


def best(limit: int, repeats: int = 25) -> float:
    return min(uvloop.run(one_run(limit)) for _ in range(repeats))


def main() -> None:
    for limit in [int(arg) for arg in sys.argv[1:]] or [100, N + 1]:
        print(f"limit {limit}: {best(limit):.1f} µs CPU per delivery (N={N})")


if __name__ == "__main__":
    main()
