"""The per-request DataLoaders: what many objects of one answer need, in one query each
(no N+1 over a list of webhooks or deliveries)."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
from aiodataloader import DataLoader

from cronhooks_admin.graphql import queries as sql
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_common.clock import Clock

# (webhook id, IANA zone its days are counted in, number of days up to today)
DayKey = tuple[int, str, int]


class AttemptsLoader(DataLoader[int, list[GraphQLObject]]):
    """All attempts of many deliveries."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[list[GraphQLObject]]:
        grouped: dict[int, list[GraphQLObject]] = {k: [] for k in keys}
        for row in await self._pool.fetch(sql.ATTEMPTS, keys):
            grouped[row["delivery_id"]].append(dict(row))
        return [grouped[k] for k in keys]


class DeliveryCostsLoader(DataLoader[int, list[GraphQLObject]]):
    """The costs of many deliveries: their attempts' and their run's (CONTRACT §16.1,
    §16.2) summed per unit, units sorted."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[list[GraphQLObject]]:
        summed: dict[int, list[GraphQLObject]] = {k: [] for k in keys}
        for row in await self._pool.fetch(sql.DELIVERY_COSTS, keys):
            # 12 significant digits, as costTotals: an attempt's 0.1 and a run's 0.2 are 0.3
            amount = float(f"{row['amount']:.12g}")
            summed[row["delivery_id"]].append({"unit": row["unit"], "amount": amount})
        return [summed[k] for k in keys]


class RunsLoader(DataLoader[int, GraphQLObject | None]):
    """The runs of many deliveries (CONTRACT §16.2), from shared.runs; None for a delivery
    that started none."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[GraphQLObject | None]:
        found = {r["delivery_id"]: dict(r) for r in await self._pool.fetch(sql.RUNS, keys)}
        return [found.get(k) for k in keys]


class FailuresLoader(DataLoader[int, int]):
    """consecutiveFailures of many webhooks."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[int]:
        found = {r["id"]: r["failures"] for r in await self._pool.fetch(sql.FAILURES, keys)}
        return [found.get(k, 0) for k in keys]


class StatsLoader(DataLoader[int, GraphQLObject]):
    """Delivery stats of many webhooks for the last 24 h and 7 d."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        super().__init__()
        self._pool = pool
        self._clock = clock

    async def batch_load_fn(self, keys: list[int]) -> list[GraphQLObject]:
        now = self._clock.now()
        rows = await self._pool.fetch(
            sql.STATS, keys, now - timedelta(days=1), now - timedelta(days=7)
        )
        found = {r["cron_webhook_id"]: r for r in rows}
        return [
            # keys as ariadne's name conversion expects them (last24h → last_24_h)
            {"last_24_h": _stats(found.get(k), "d1"), "last_7_d": _stats(found.get(k), "d7")}
            for k in keys
        ]


def _stats(row: asyncpg.Record | None, name: str) -> GraphQLObject:
    if row is None or not row[f"{name}_total"]:
        return {
            "total": 0,
            "succeeded": 0,
            "failed": 0,
            "success_rate": None,
            "p_50_duration_ms": None,
            "p_95_duration_ms": None,
        }
    total = row[f"{name}_total"]

    def ms(value: float | None) -> int | None:
        return None if value is None else round(value)

    return {
        "total": total,
        "succeeded": row[f"{name}_succeeded"],
        "failed": row[f"{name}_failed"],
        "success_rate": row[f"{name}_succeeded"] / total,
        "p_50_duration_ms": ms(row[f"{name}_p50"]),
        "p_95_duration_ms": ms(row[f"{name}_p95"]),
    }


class DailyStatsLoader(DataLoader[DayKey, list[GraphQLObject]]):
    """dailyStats of many webhooks: finished deliveries per calendar day in each webhook's
    zone, every day of the window listed, oldest first, days without deliveries as zeros."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        super().__init__()
        self._pool = pool
        self._clock = clock

    async def batch_load_fn(self, keys: list[DayKey]) -> list[list[GraphQLObject]]:
        found = await _rows_by_day_key(self._pool, sql.DAILY_STATS, keys, self._clock)
        return [
            [
                {
                    "day": r["day"].isoformat(),
                    "total": r["total"],
                    "succeeded": r["succeeded"],
                    "failed": r["failed"],
                    "p_95_duration_ms": None if r["p95"] is None else round(r["p95"]),
                }
                for r in found[k]
            ]
            for k in keys
        ]


class CostTotalsLoader(DataLoader[DayKey, list[GraphQLObject]]):
    """costTotals of many webhooks (CONTRACT §16.1): the kept daily sums, newest day first,
    units sorted; only days and units with costs."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        super().__init__()
        self._pool = pool
        self._clock = clock

    async def batch_load_fn(self, keys: list[DayKey]) -> list[list[GraphQLObject]]:
        found = await _rows_by_day_key(self._pool, sql.COST_TOTALS, keys, self._clock)
        # 12 significant digits: what the agents reported, without the noise of summing
        # binary fractions (three reports of 0.4 sum to 1.2000000000000002).
        return [
            [
                {"day": r["day"], "unit": r["unit"], "amount": float(f"{r['amount']:.12g}")}
                for r in found[k]
            ]
            for k in keys
        ]


async def _rows_by_day_key(
    pool: asyncpg.Pool, query: str, keys: list[DayKey], clock: Clock
) -> dict[DayKey, list[asyncpg.Record]]:
    """One query for many (webhook, zone, days) windows (DAILY_STATS, COST_TOTALS: keyed
    by id, tz, days, up to now), its rows grouped by window in the query's order."""
    rows = await pool.fetch(
        query, [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], clock.now()
    )
    found: dict[DayKey, list[asyncpg.Record]] = {k: [] for k in keys}
    for r in rows:
        found[(r["id"], r["tz"], r["days"])].append(r)
    return found
