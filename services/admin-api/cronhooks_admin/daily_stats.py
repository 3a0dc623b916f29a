"""`dailyStats(days)` of a webhook (the web page's 7-day chart, CONTRACT §10): finished
deliveries per calendar day in the webhook's time zone (UTC for change webhooks), with
how many succeeded and failed and their p95 duration. Every day of the window is listed,
oldest first, days without deliveries as zeros.

Computed in SQL from the read model, for many webhooks in one query (a DataLoader), each
day a range scan of `deliveries_by_webhook`; `days` is bounded, so one answer is too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg
from aiodataloader import DataLoader
from graphql import GraphQLResolveInfo

from cronhooks_common.clock import Clock
from cronhooks_common.graphql_support import bad_input

if TYPE_CHECKING:
    from cronhooks_admin.context import Context

MAX_DAYS = 31

# (webhook id, IANA zone its days are counted in, number of days up to today)
Key = tuple[int, str, int]


class DailyStatsLoader(DataLoader[Key, list[dict[str, Any]]]):
    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        super().__init__()
        self._pool = pool
        self._clock = clock

    async def batch_load_fn(self, keys: list[Key]) -> list[list[dict[str, Any]]]:
        rows = await self._pool.fetch(
            """
            with wanted as (
                select distinct id, tz, days
                from unnest($1::bigint[], $2::text[], $3::int[]) as w(id, tz, days)
            ), calendar as (
                select w.id, w.tz, w.days, day::date as day,
                       day::timestamp at time zone w.tz as starts,
                       (day::date + 1)::timestamp at time zone w.tz as ends
                from wanted w,
                     generate_series(($4::timestamptz at time zone w.tz)::date - (w.days - 1),
                                     ($4::timestamptz at time zone w.tz)::date,
                                     interval '1 day') as day
            )
            select c.id, c.tz, c.days, c.day,
                   count(d.id) as total,
                   count(d.id) filter (where d.status = 'success') as succeeded,
                   count(d.id) filter (where d.status = 'failed') as failed,
                   percentile_cont(0.95) within group (order by d.duration_ms) as p95
            from calendar c
            left join admin.deliveries d
              on d.cron_webhook_id = c.id and d.created_at >= c.starts
             and d.created_at < c.ends and d.status in ('success', 'failed')
            group by c.id, c.tz, c.days, c.day
            order by c.id, c.day
            """,
            [k[0] for k in keys],
            [k[1] for k in keys],
            [k[2] for k in keys],
            self._clock.now(),
        )
        found: dict[Key, list[dict[str, Any]]] = {k: [] for k in keys}
        for r in rows:
            found[(r["id"], r["tz"], r["days"])].append(
                {
                    "day": r["day"].isoformat(),
                    "total": r["total"],
                    "succeeded": r["succeeded"],
                    "failed": r["failed"],
                    "p_95_duration_ms": None if r["p95"] is None else round(r["p95"]),
                }
            )
        return [found[k] for k in keys]


async def resolve_daily_stats(
    webhook: dict[str, Any], info: GraphQLResolveInfo[Context], days: int | None = 7
) -> list[dict[str, Any]]:
    if days is None or not 1 <= days <= MAX_DAYS:  # null is allowed by `Int = 7`
        raise bad_input("days", f"must be from 1 to {MAX_DAYS}")
    zone = webhook.get("timezone") or "UTC"
    return await info.context.daily_stats.load((webhook["id"], zone, days))
