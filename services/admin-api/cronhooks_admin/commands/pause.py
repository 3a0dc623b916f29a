"""pauseDeliveries / resumeDeliveries / deliveryPause (CONTRACT §16.4): the command side of
the pause switch, whose state is `shared.delivery_pause` (cronhooks_common.pause).

Each command locks the row, decides from it (never from a read model) and appends its
event in that transaction. A pause's UPDATE waits for the scheduler's and the importer's
decisions under way (they hold the row FOR SHARE), so once pauseDeliveries answers nothing
new is requested; manual deliveries (`refuse_if_paused`) read it the same way.

A pause whose `until` came is over whether or not its `deliveries.resumed` was appended
yet (the scheduler appends it): pausing then ends it first and starts a new pause;
resuming then appends that automatic end, which is due anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import structlog

from cronhooks_admin.auth import Admin
from cronhooks_admin.errors import InputError, Paused
from cronhooks_common import pause
from cronhooks_common.clock import Clock, iso, utc
from cronhooks_common.events import DeliveriesPaused, DeliveriesResumed

log = structlog.get_logger(__name__)

MAX_REASON = 1000


def check_reason(value: Any) -> str:
    reason = value.strip() if isinstance(value, str) else ""
    if not reason:
        raise InputError("reason", "must not be empty")
    if len(reason) > MAX_REASON:
        raise InputError("reason", f"must be at most {MAX_REASON} characters")
    return reason


def check_until(until: datetime | None, now: datetime) -> datetime | None:
    if until is not None and utc(until) <= now:
        raise InputError("until", "must be in the future")
    return None if until is None else utc(until)


def shown(switch: pause.Pause, now: datetime) -> dict[str, Any]:
    """The GraphQL `DeliveryPause` of the switch at `now`."""
    if not switch.active(now):
        return {"paused": False, "since": None, "until": None, "reason": None}
    return {"paused": True, "since": switch.since, "until": switch.until, "reason": switch.reason}


async def refuse_if_paused(conn: asyncpg.Connection, now: datetime) -> None:
    """First thing in a manual delivery's transaction: PAUSED while paused (the share
    lock orders it against a pause committing, as the scheduler's batches are)."""
    if (await pause.deciding(conn)).active(now):
        raise Paused()


@dataclass(frozen=True, slots=True)
class PauseCommands:
    pool: asyncpg.Pool
    clock: Clock

    async def show(self) -> dict[str, Any]:
        return shown(await pause.current(self.pool), self.clock.now())

    async def pause(self, until: datetime | None, reason: Any, admin: Admin) -> dict[str, Any]:
        """Pause, or replace a pause's `until` and `reason` (its `since` stays)."""
        now = self.clock.now()
        text = check_reason(reason)
        ends = check_until(until, now)
        async with self.pool.acquire() as conn, conn.transaction():
            switch = await pause.end_expired(conn, now, actor=admin.actor)
            replaced = switch.since is not None
            since = switch.since if switch.since is not None else now
            paused = DeliveriesPaused(
                since=iso(since),
                until=None if ends is None else iso(ends),
                reason=text,
                by=admin.actor,
                replaced=replaced,
            )
            await pause.pause(conn, paused, since=since, until=ends, now=now)
        log.info("deliveries_paused", until=paused.until, replaced=replaced, by=admin.actor)
        return shown(pause.Pause(since, ends, text, admin.actor), now)

    async def resume(self, admin: Admin) -> dict[str, Any]:
        """Resume; not paused: nothing changes and nothing is appended."""
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            switch = await pause.end_expired(conn, now, actor=admin.actor)
            if switch.since is None:
                return shown(switch, now)
            resumed = DeliveriesResumed(
                since=iso(switch.since), resumed_at=iso(now), automatic=False, by=admin.actor
            )
            await pause.resume(conn, resumed, now, actor=admin.actor, now=now)
        log.info("deliveries_resumed", automatic=False, by=admin.actor)
        return shown(pause.Pause(), now)
