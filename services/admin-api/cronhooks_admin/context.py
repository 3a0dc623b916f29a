"""Per-request GraphQL context: the admin, the adapters, and the request's DataLoaders."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
from aiodataloader import DataLoader

from cronhooks_admin.agents import Agents
from cronhooks_admin.api_keys import ApiKeys
from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import Commands
from cronhooks_admin.daily_stats import DailyStatsLoader
from cronhooks_admin.note_reads import NoteReads
from cronhooks_admin.note_writes import NoteWrites
from cronhooks_common.clock import Clock
from cronhooks_common.graphql_limits import Budget, ListCost

# nextRuns(count: Int = 5): count from 0 to 100 per selection, 10,000 values per request
# (CONTRACT §15), checked from the document before validation and charged as resolved.
NEXT_RUNS = ListCost(
    field="nextRuns", argument="count", default=5, maximum=100, limit=10_000, noun="nextRuns values"
)


class AttemptsLoader(DataLoader[int, list[dict[str, Any]]]):
    """All attempts of many deliveries in one query (no N+1 over a delivery list)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[list[dict[str, Any]]]:
        rows = await self._pool.fetch(
            # An attempt without its log: retention dropped the bodies (logsExpired).
            "select a.*, l.request_body, l.response_body, l.delivery_id is null as logs_expired"
            " from admin.delivery_attempts a left join admin.attempt_logs l"
            " on l.delivery_id = a.delivery_id and l.attempt = a.attempt"
            " where a.delivery_id = any($1::bigint[]) order by a.delivery_id, a.attempt",
            keys,
        )
        grouped: dict[int, list[dict[str, Any]]] = {k: [] for k in keys}
        for row in rows:
            grouped[row["delivery_id"]].append(dict(row))
        return [grouped[k] for k in keys]


class FailuresLoader(DataLoader[int, int]):
    """consecutiveFailures: failed deliveries since the later of the last success and the
    last re-enable. Derived from the deliveries, so it does not depend on event order."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[int]:
        rows = await self._pool.fetch(
            """
            select w.id, (
                select count(*) from admin.deliveries d
                where d.cron_webhook_id = w.id and d.status = 'failed'
                  and d.completed_at > coalesce(w.failures_reset_at, '-infinity')
                  and (d.completed_at, d.id) > coalesce(
                      (select (s.completed_at, s.id) from admin.deliveries s
                       where s.cron_webhook_id = w.id and s.status = 'success'
                       order by s.completed_at desc, s.id desc limit 1),
                      ('-infinity'::timestamptz, 0::bigint))
            ) as failures
            from admin.webhooks w where w.id = any($1::bigint[])
            """,
            keys,
        )
        found = {r["id"]: r["failures"] for r in rows}
        return [found.get(k, 0) for k in keys]


class StatsLoader(DataLoader[int, dict[str, Any]]):
    """Delivery stats of many webhooks for the last 24 h and 7 d, in one query."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        super().__init__()
        self._pool = pool
        self._clock = clock

    async def batch_load_fn(self, keys: list[int]) -> list[dict[str, Any]]:
        now = self._clock.now()
        rows = await self._pool.fetch(
            f"""
            select cron_webhook_id, {_window("d1", "$2")}, {_window("d7", "$3")}
            from admin.deliveries
            where cron_webhook_id = any($1::bigint[]) and created_at > $3
              and status in ('success', 'failed')
            group by cron_webhook_id
            """,
            keys,
            now - timedelta(days=1),
            now - timedelta(days=7),
        )
        found = {r["cron_webhook_id"]: r for r in rows}
        return [
            # keys as ariadne's name conversion expects them (last24h → last_24_h)
            {"last_24_h": _stats(found.get(k), "d1"), "last_7_d": _stats(found.get(k), "d7")}
            for k in keys
        ]


def _window(name: str, since: str) -> str:
    within = f"created_at > {since}"
    return f"""
        count(*) filter (where {within}) as {name}_total,
        count(*) filter (where {within} and status = 'success') as {name}_succeeded,
        count(*) filter (where {within} and status = 'failed') as {name}_failed,
        percentile_cont(0.5) within group (order by duration_ms)
            filter (where {within}) as {name}_p50,
        percentile_cont(0.95) within group (order by duration_ms)
            filter (where {within}) as {name}_p95
    """


def _stats(row: asyncpg.Record | None, name: str) -> dict[str, Any]:
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


@dataclass
class Context:
    admin: Admin
    pool: asyncpg.Pool
    commands: Commands
    clock: Clock
    agents: Agents
    api_keys: ApiKeys
    note_writes: NoteWrites
    attempts: AttemptsLoader = field(init=False)
    failures: FailuresLoader = field(init=False)
    stats: StatsLoader = field(init=False)
    daily_stats: DailyStatsLoader = field(init=False)
    next_runs: Budget = field(init=False)
    note_reads: NoteReads = field(init=False)

    def __post_init__(self) -> None:
        self.next_runs = Budget(NEXT_RUNS)
        self.note_reads = NoteReads(self.pool)
        self.attempts = AttemptsLoader(self.pool)
        self.failures = FailuresLoader(self.pool)
        self.stats = StatsLoader(self.pool, self.clock)
        self.daily_stats = DailyStatsLoader(self.pool, self.clock)
