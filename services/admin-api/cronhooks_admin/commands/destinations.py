"""setDestinationLimit / destinationLimits / destinationHolds / destinationWaiting (CONTRACT
§17): the command side of destination limits, whose state is `shared.destination_limits`,
`shared.destination_holds` and what the dispatchers tell in `shared.destination_waiting`
(cronhooks_common.destination_state). The dispatchers read the limits and holds, so a limit
set here applies on every replica within about a second.

Like the pause switch, the answer is the state as stored, not a read model: there is
nothing to project (the event, `destination.limit_set`, is the history; the row is now).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from cronhooks_admin.auth import Admin
from cronhooks_admin.errors import InputError
from cronhooks_common import destination_state
from cronhooks_common.clock import Clock
from cronhooks_common.destination_key import DestinationError, destination
from cronhooks_common.destination_state import Limit

log = structlog.get_logger(__name__)

MAX_CONCURRENT = 10_000


def check_limit(where: Any, max_concurrent: Any, max_per_second: Any) -> Limit:
    """The override asked for, or InputError naming the argument."""
    if not isinstance(where, str):
        raise InputError("destination", "must be an http or https URL")
    try:
        key = destination(where)
    except DestinationError as exc:
        raise InputError("destination", str(exc)) from exc
    if max_concurrent is not None and (
        isinstance(max_concurrent, bool)
        or not isinstance(max_concurrent, int)
        or not 1 <= max_concurrent <= MAX_CONCURRENT
    ):
        raise InputError("maxConcurrent", f"must be between 1 and {MAX_CONCURRENT:,}")
    if max_per_second is not None and (
        isinstance(max_per_second, bool)
        or not isinstance(max_per_second, int | float)
        or not math.isfinite(max_per_second)
        or max_per_second <= 0
    ):
        raise InputError("maxPerSecond", "must be greater than 0")
    rate = None if max_per_second is None else float(max_per_second)
    return Limit(key, max_concurrent, rate)


def shown(limit: Limit) -> dict[str, Any]:
    """The GraphQL `DestinationLimit`."""
    return {
        "destination": limit.destination,
        "max_concurrent": limit.max_concurrent,
        "max_per_second": limit.max_per_second,
    }


@dataclass(frozen=True, slots=True)
class DestinationCommands:
    pool: asyncpg.Pool
    clock: Clock

    async def set_limit(
        self, where: Any, max_concurrent: Any, max_per_second: Any, admin: Admin
    ) -> dict[str, Any]:
        """Set a destination's override; both limits null removes it."""
        limit = check_limit(where, max_concurrent, max_per_second)
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            await destination_state.set_limit(conn, limit, actor=admin.actor, now=now)
        log.info(
            "destination_limit_set",
            destination=limit.destination,
            max_concurrent=limit.max_concurrent,
            max_per_second=limit.max_per_second,
            by=admin.actor,
        )
        return shown(limit)

    async def limits(self) -> list[dict[str, Any]]:
        return [shown(limit) for limit in await destination_state.limits(self.pool)]

    async def holds(self) -> list[dict[str, Any]]:
        now = self.clock.now()
        return [
            {"destination": h.destination, "held_until": h.held_until}
            for h in await destination_state.holds(self.pool, now)
        ]

    async def waiting(self) -> list[dict[str, Any]]:
        waiting = await destination_state.waiting(self.pool)
        return [{"destination": d, "waiting": n} for d, n in waiting.items()]
