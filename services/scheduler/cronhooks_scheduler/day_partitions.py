"""Tables partitioned by UTC day of a time column, kept as long as the deliveries.

Some tables grow by a row per delivery but are keyed by something other than the
delivery id, because their key is what makes a duplicate impossible across replicas:
`scheduler.slot_requests` (webhook, slot), `importer.change_requests` (webhook, batch,
batch time). Partitioned by the time in their key, one key always falls in one partition
and stays unique. Their owners register them in `eventstore.dated_tables` (migrations
0020); the retention job (retention.py) keeps, for each, the partitions of the next days
ready (a row beyond them would land in the default partition) and drops the days older
than the delivery retention (kept two days at least: no timer fires a slot that old
again, the matcher never reads a batch that old again). Partitions are named
`{table}_dYYYYMMDD`; the rows from before the migration are in `{table}_before`.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import asyncpg
import structlog

from cronhooks_scheduler import queries
from cronhooks_scheduler.bucket_ddl import drop_partition

log = structlog.get_logger(__name__)

AHEAD = 3  # days of partitions kept ready
KEEP_AT_LEAST = timedelta(days=2)


def day_name(table: str, day: datetime) -> str:
    return f"{table}_d{day:%Y%m%d}"


def midnight(at: datetime) -> datetime:
    return datetime.combine(at.astimezone(UTC).date(), time(), tzinfo=UTC)


async def keep_days(conn: asyncpg.Connection, now: datetime, retention_days: int) -> None:
    """Every registered table: create the coming days, drop those past the retention
    (0: none)."""
    keep = max(timedelta(days=retention_days), KEEP_AT_LEAST) if retention_days else None
    for r in await conn.fetch(queries.DATED_TABLES):
        table = r["name"]
        parts = await partition_ends(conn, table)
        start = max([midnight(now), *parts.values()])  # the days before are covered
        for i in range(AHEAD):
            day = midnight(now) + timedelta(days=i)
            if day >= start and day_name(table, day) not in parts:
                await _create(conn, table, day)
        if keep is not None:
            for name, upper in parts.items():
                if upper <= now - keep:
                    await drop_partition(conn, table, name)
                    log.info("retention_day_dropped", partition=name)


async def _create(conn: asyncpg.Connection, table: str, day: datetime) -> None:
    until = day + timedelta(days=1)
    try:
        async with conn.transaction():  # a savepoint: the rest of the step goes on
            await conn.execute(
                queries.CREATE_DAY.format(
                    name=day_name(table, day), table=table, start=_lit(day), until=_lit(until)
                )
            )
    except asyncpg.CheckViolationError:
        # Rows of that day are in the default partition already (the job was down for
        # days): they stay there, kept; the day after gets its partition.
        log.warning("retention_day_blocked", table=table, day=day.date().isoformat())
        return
    log.info("retention_day_created", table=table, day=day.date().isoformat())


def _lit(at: datetime) -> str:
    return f"'{at.isoformat()}'"  # our own midnights, never input


async def partition_ends(conn: asyncpg.Connection, table: str) -> dict[str, datetime]:
    """Each bounded partition of `table` and the end of its range."""
    rows = await conn.fetch(queries.PARTITIONS, table)
    out = {}
    for r in rows:
        if "TO ('" in r["bound"]:
            upper = r["bound"].rsplit("TO ('", 1)[1].split("')", 1)[0]
            out[r["name"]] = datetime.fromisoformat(upper).astimezone(UTC)
    return out
