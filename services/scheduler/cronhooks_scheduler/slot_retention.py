"""`scheduler.slot_requests` by UTC day of the slot (migration 0020), so it stays bounded.

The table's key (webhook, slot) makes a second delivery id for one slot impossible across
replicas; partitioned by the slot, one slot is always in one partition and the key stays
unique. Run by the retention job (cronhooks_common.retention, as one of its steps): it
creates the partitions of the next days ahead (a slot beyond them would land in the
default partition), and drops the days older than the delivery retention (their
deliveries have gone; no timer fires a slot that old again), keeping two days at least.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import asyncpg
import structlog

log = structlog.get_logger(__name__)

TABLE = "scheduler.slot_requests"
AHEAD = 3  # days of partitions kept ready
KEEP_AT_LEAST = timedelta(days=2)


def day_name(day: datetime) -> str:
    return f"{TABLE}_d{day:%Y%m%d}"


def midnight(at: datetime) -> datetime:
    return datetime.combine(at.astimezone(UTC).date(), time(), tzinfo=UTC)


class SlotRequestDays:
    def __init__(self, *, delivery_retention_days: int) -> None:
        self._keep = (
            max(timedelta(days=delivery_retention_days), KEEP_AT_LEAST)
            if delivery_retention_days
            else None
        )

    async def step(self, conn: asyncpg.Connection, now: datetime) -> None:
        parts = await _partitions(conn)
        start = max([midnight(now), *parts.values()])  # the days before are covered
        for i in range(AHEAD):
            day = midnight(now) + timedelta(days=i)
            if day >= start and day_name(day) not in parts:
                until = day + timedelta(days=1)
                await conn.execute(
                    f"create table {day_name(day)} partition of {TABLE}"
                    f" for values from ({_lit(day)}) to ({_lit(until)})"
                )
                log.info("retention_slot_day_created", day=day.date().isoformat())
        if self._keep is None:
            return
        for name, upper in parts.items():
            if upper <= now - self._keep:
                await conn.execute(f"drop table {name}")
                log.info("retention_slot_day_dropped", partition=name)


def _lit(at: datetime) -> str:
    return f"'{at.isoformat()}'"  # our own midnights, never input


async def _partitions(conn: asyncpg.Connection) -> dict[str, datetime]:
    """Each bounded partition of the table and the end of its range."""
    rows = await conn.fetch(
        """
        select c.oid::regclass::text as name, pg_get_expr(c.relpartbound, c.oid) as bound
        from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = $1::regclass
        """,
        TABLE,
    )
    out = {}
    for r in rows:
        if "TO ('" in r["bound"]:
            upper = r["bound"].rsplit("TO ('", 1)[1].split("')", 1)[0]
            out[r["name"]] = datetime.fromisoformat(upper).astimezone(UTC)
    return out
