"""Claim-before-run stores: a fire for (job_id, fire_at) runs at most once, also across
agent replicas that share the store (a SQLite file on one host, Postgres across hosts)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol


class ClaimStore(Protocol):
    async def claim(self, job_id: str, fire_at: str) -> bool:
        """True for exactly one caller per (job_id, fire_at), ever."""


class SqliteClaimStore:
    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        with sqlite3.connect(self._path, timeout=30) as db:
            db.execute("pragma journal_mode=wal")
            db.execute(
                "create table if not exists claims (job_id text not null, fire_at text not null,"
                " claimed_at real not null, primary key (job_id, fire_at))"
            )

    def _claim(self, job_id: str, fire_at: str) -> bool:
        with sqlite3.connect(self._path, timeout=30) as db:
            cursor = db.execute(
                "insert or ignore into claims (job_id, fire_at, claimed_at) values (?, ?, ?)",
                (job_id, fire_at, time.time()),
            )
            return cursor.rowcount == 1

    async def claim(self, job_id: str, fire_at: str) -> bool:
        return await asyncio.to_thread(self._claim, job_id, fire_at)


class PostgresClaimStore:
    """Uses an asyncpg pool (the agent's own database)."""

    def __init__(self, pool: Any, table: str = "cronhooks_agent_claims") -> None:
        self._pool = pool
        self._table = table
        self._ready = False

    async def claim(self, job_id: str, fire_at: str) -> bool:
        if not self._ready:
            await self._pool.execute(
                f"create table if not exists {self._table} (job_id text not null,"
                " fire_at text not null, claimed_at timestamptz not null default now(),"
                " primary key (job_id, fire_at))"
            )
            self._ready = True
        won = await self._pool.fetchval(
            f"insert into {self._table} (job_id, fire_at) values ($1, $2)"
            " on conflict do nothing returning true",
            job_id,
            fire_at,
        )
        return bool(won)
