"""The scheduler's copy of each webhook (`scheduler.webhooks`), kept and read.

timers.py keeps it from the webhook's events: the configuration as the event wrote it
(plus `webhook_id`), whether the webhook is deleted, and whether the platform disabled it
(`gone`: its pending retries are cancelled). Firing (timer_kinds.py) reads the
configuration through two views: `Schedule` (what a cron timer's slots depend on) and
the request's `Target` (`cronhooks_common.webhooks.target_of`). A view takes only its own
keys, each absent one with the value absence has always meant (configurations written
before a setting existed lack it), so a copy of any age reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import msgspec

from cronhooks_common.events import ConfigData, CostAmount, Event
from cronhooks_common.jitter import jitter_offset
from cronhooks_scheduler import queries


class Schedule(msgspec.Struct, frozen=True, kw_only=True):
    """A cron webhook's schedule, as its copy holds it."""

    cron_schedule: str = ""  # absent (never, from a command): unusable, like a bad one
    timezone: str = ""
    catch_up_policy: str = "LATEST_ONCE"
    misfire_grace_seconds: int = 60
    jitter_seconds: int | None = None  # absent or null: no jitter
    max_deliveries_per_day: int | None = None  # absent or null: no limit
    max_cost_per_day: tuple[CostAmount, ...] = ()  # absent or empty: no limit (§16.4)

    def offset(self, webhook_id: int) -> timedelta:
        """The webhook's jitter offset (jitter.py): its slots are sent this much later."""
        return jitter_offset(webhook_id, self.jitter_seconds or 0)


def schedule_of(config: ConfigData) -> Schedule:
    return msgspec.convert(config, Schedule)


class CopiedConfig(ConfigData, total=False):
    """The configuration as the copy keeps it: with its webhook's id beside the settings."""

    webhook_id: int


@dataclass(frozen=True, slots=True)
class Copy:
    """A row of scheduler.webhooks. `config` is JSON as the webhook's events wrote it: the
    views above read it, whatever its age."""

    config: CopiedConfig
    deleted: bool = False
    gone: bool = False


async def lock(conn: asyncpg.Connection, webhook_id: int, event: Event) -> tuple[bool, Copy | None]:
    """Lock the webhook's copy: (False, None) if `event` is older than what it already
    holds, else (True, the copy, or None before the webhook's first event)."""
    row = await conn.fetchrow(queries.LOCK_WEBHOOK, webhook_id)
    if row is None:
        return True, None
    if row["stream_version"] >= event.version:
        return False, None  # an older event arriving late: the newer state is already applied
    config: CopiedConfig = row["config"]  # (jsonb, decoded by the pool's codec)
    return True, Copy(config.copy(), gone=bool(row["gone"]))


async def save(conn: asyncpg.Connection, webhook_id: int, event: Event, copy: Copy) -> None:
    await conn.execute(
        queries.SAVE_WEBHOOK, webhook_id, event.version, copy.config, copy.deleted, copy.gone
    )
