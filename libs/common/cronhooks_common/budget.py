"""A webhook's daily budget (CONTRACT §13, `maxDeliveriesPerDay`).

`shared.daily_deliveries` holds, per (webhook, day in the webhook's zone), how many
deliveries were requested that day: first attempts of schedule slots (each catch-up
delivery one) and manual requests, never retries. Whoever appends a `delivery.requested`
of a webhook with a limit updates the row in the same transaction — the scheduler for
slots (`admit`), admin-api for Run now and replays (`count_manual`) — so the count is
exactly what the event store holds: a rolled-back append leaves no count, a replayed
slot (already in `slot_requests`) is not counted again. The row lock orders concurrent
writers (scheduler replicas, admin-api), so a limit is never exceeded by slots.

Only webhooks with a limit are counted: those without one cost nothing here. When a
limit is set on a webhook that had none, admin-api seeds the day's row from its delivery
history (`seed`), so the deliveries of that day from before the limit count too.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, time, timedelta

import asyncpg

from cronhooks_common.cron import parse_zone
from cronhooks_common.events import ConfigData

DayKey = tuple[int, date]


def daily_limit(config: ConfigData) -> int | None:
    """The webhook's limit, or None (no limit; absent from configs written before it)."""
    value = config.get("max_deliveries_per_day")
    return None if value is None else int(value)


def local_day(instant: datetime, timezone: str) -> date:
    """The calendar day of `instant` in the zone: days of 23 or 25 hours need no care."""
    return instant.astimezone(parse_zone(timezone)).date()


def day_bounds(day: date, timezone: str) -> tuple[datetime, datetime]:
    """The instants at which `day` starts and ends in the zone (a midnight that a DST change
    skips is read with the offset before it, i.e. as the instant of the change)."""
    zone = parse_zone(timezone)
    start = datetime.combine(day, time.min, tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=zone)
    return start, end


async def seed(conn: asyncpg.Connection, key: DayKey, requested: int) -> None:
    """Raise the day's count to at least `requested` (the deliveries the day already had
    when a limit was set; a count already kept, from an earlier limit, is never lowered)."""
    await conn.execute(
        """
        insert into shared.daily_deliveries as d (webhook_id, day, requested)
        values ($1, $2, $3)
        on conflict (webhook_id, day) do update
            set requested = greatest(d.requested, excluded.requested)
        """,
        key[0],
        key[1],
        requested,
    )


async def _lock_days(conn: asyncpg.Connection, keys: list[DayKey]) -> dict[DayKey, int]:
    """Create the day rows that are missing, lock them all (in key order, so two writers
    never wait on each other in a cycle) and return their counts."""
    webhooks = [w for w, _ in keys]
    days = [d for _, d in keys]
    await conn.execute(
        """
        insert into shared.daily_deliveries (webhook_id, day, requested)
        select webhook_id, day, 0 from unnest($1::bigint[], $2::date[]) as k(webhook_id, day)
        on conflict (webhook_id, day) do nothing
        """,
        webhooks,
        days,
    )
    rows = await conn.fetch(
        """
        select d.webhook_id, d.day, d.requested
        from shared.daily_deliveries d
        join unnest($1::bigint[], $2::date[]) as k(webhook_id, day) using (webhook_id, day)
        order by d.webhook_id, d.day
        for update of d
        """,
        webhooks,
        days,
    )
    return {(r["webhook_id"], r["day"]): r["requested"] for r in rows}


async def _add(conn: asyncpg.Connection, added: Counter[DayKey]) -> None:
    keys = [k for k, n in added.items() if n]
    if not keys:
        return
    await conn.execute(
        """
        update shared.daily_deliveries d set requested = d.requested + a.n
        from unnest($1::bigint[], $2::date[], $3::int[]) as a(webhook_id, day, n)
        where d.webhook_id = a.webhook_id and d.day = a.day
        """,
        [w for w, _ in keys],
        [d for _, d in keys],
        [added[k] for k in keys],
    )


async def admit(conn: asyncpg.Connection, wanted: list[tuple[DayKey, int]]) -> list[bool]:
    """Decide schedule slots against their day's budget: `wanted` holds each slot's
    (webhook, day) and limit, in slot order; the answer says which fit. The admitted
    ones are counted. Call inside the transaction that appends their requests."""
    if not wanted:
        return []
    counts = await _lock_days(conn, sorted({key for key, _ in wanted}))
    added: Counter[DayKey] = Counter()
    verdicts = []
    for key, limit in wanted:
        fits = counts.get(key, 0) + added[key] < limit
        if fits:
            added[key] += 1
        verdicts.append(fits)
    await _add(conn, added)
    return verdicts


async def count_manual(conn: asyncpg.Connection, keys: list[DayKey]) -> None:
    """Count manual requests (each key once per request): they are always sent, the admin
    asked for them, but they use up the day's budget for the slots after them."""
    if not keys:
        return
    await _lock_days(conn, sorted(set(keys)))
    await _add(conn, Counter(keys))


async def forget_before(conn: asyncpg.Connection, day: date) -> None:
    """Retention: drop the counts of the days before `day`. A count is read only on its own
    day, so old rows only take room. The table is small (a row per webhook *with a limit*
    and day), so this is one delete of a day's few rows per day, not a partition scheme."""
    await conn.execute("delete from shared.daily_deliveries where day < $1", day)
