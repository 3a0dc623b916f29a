"""Per-request GraphQL context: the admin, the command side, and the request's DataLoaders
and budgets."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import Commands
from cronhooks_admin.commands.note_writes import NoteWrites
from cronhooks_admin.graphql.loaders import (
    AttemptsLoader,
    CostTotalsLoader,
    DailyStatsLoader,
    DeliveryCostsLoader,
    FailuresLoader,
    RunsLoader,
    StatsLoader,
)
from cronhooks_admin.graphql.note_reads import NoteReads
from cronhooks_common.clock import Clock
from cronhooks_common.graphql_limits import Budget, ListCost

# nextRuns(count: Int = 5): count from 0 to 100 per selection, 10,000 values per request
# (CONTRACT §15), checked from the document before validation and charged as resolved.
NEXT_RUNS = ListCost(
    field="nextRuns", argument="count", default=5, maximum=100, limit=10_000, noun="nextRuns values"
)


@dataclass
class Context:
    admin: Admin
    pool: asyncpg.Pool
    commands: Commands
    note_writes: NoteWrites
    clock: Clock
    attempts: AttemptsLoader = field(init=False)
    delivery_costs: DeliveryCostsLoader = field(init=False)
    runs: RunsLoader = field(init=False)
    failures: FailuresLoader = field(init=False)
    stats: StatsLoader = field(init=False)
    daily_stats: DailyStatsLoader = field(init=False)
    cost_totals: CostTotalsLoader = field(init=False)
    next_runs: Budget = field(init=False)
    note_reads: NoteReads = field(init=False)

    def __post_init__(self) -> None:
        self.next_runs = Budget(NEXT_RUNS)
        self.note_reads = NoteReads(self.pool)
        self.attempts = AttemptsLoader(self.pool)
        self.delivery_costs = DeliveryCostsLoader(self.pool)
        self.runs = RunsLoader(self.pool)
        self.failures = FailuresLoader(self.pool)
        self.stats = StatsLoader(self.pool, self.clock)
        self.daily_stats = DailyStatsLoader(self.pool, self.clock)
        self.cost_totals = CostTotalsLoader(self.pool, self.clock)
