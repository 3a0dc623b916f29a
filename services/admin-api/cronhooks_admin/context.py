"""Per-request GraphQL context: the admin, the adapters, and the request's DataLoaders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiodataloader import DataLoader

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import Commands
from cronhooks_common.clock import Clock


class AttemptsLoader(DataLoader[int, list[dict[str, Any]]]):
    """All attempts of many deliveries in one query (no N+1 over a delivery list)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()
        self._pool = pool

    async def batch_load_fn(self, keys: list[int]) -> list[list[dict[str, Any]]]:
        rows = await self._pool.fetch(
            "select * from admin.delivery_attempts where delivery_id = any($1::bigint[])"
            " order by delivery_id, attempt",
            keys,
        )
        grouped: dict[int, list[dict[str, Any]]] = {k: [] for k in keys}
        for row in rows:
            grouped[row["delivery_id"]].append(dict(row))
        return [grouped[k] for k in keys]


@dataclass
class Context:
    admin: Admin
    pool: asyncpg.Pool
    commands: Commands
    clock: Clock
    attempts: AttemptsLoader = field(init=False)

    def __post_init__(self) -> None:
        self.attempts = AttemptsLoader(self.pool)
