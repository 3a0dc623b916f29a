"""API keys (CONTRACT §5): the command side and the admin's list.

A key is created by an admin, shown once, and kept only as its SHA-256 in
`shared.api_keys`, written in the transaction that appends the key's event
(`api_key.created`, `api_key.revoked` on stream `api_key-{id}`). The importer reads that
table on each request that sends `X-API-Key`: a revocation holds from its commit on.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_admin.auth import Admin, hash_token
from cronhooks_admin.commands import NotFound
from cronhooks_admin.validation import InputError
from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.events import Causation, EventType, NewEvent, api_key_stream

API_KEY_PREFIX = "chk_"
MAX_NAME = 200

_COLUMNS = "id, name, skip_webhooks, created_at, created_by, revoked_at"


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def check_name(value: Any) -> str:
    name = value.strip() if isinstance(value, str) else ""
    if not name:
        raise InputError("name", "must not be empty")
    if len(name) > MAX_NAME:
        raise InputError("name", f"must be at most {MAX_NAME} characters")
    if not name.isprintable():
        raise InputError("name", "must not contain control characters")
    return name


@dataclass(frozen=True, slots=True)
class ApiKeys:
    pool: asyncpg.Pool
    clock: Clock

    async def create(self, fields: dict[str, Any], admin: Admin) -> tuple[asyncpg.Record, str]:
        """A new key: (its row, the key itself, which is never shown again)."""
        name = check_name(fields.get("name"))
        skip_webhooks = bool(fields.get("skip_webhooks", False))
        key = new_api_key()
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            key_id: int = await conn.fetchval("select nextval('shared.api_key_ids')")
            row: asyncpg.Record = await conn.fetchrow(
                f"""
                insert into shared.api_keys
                    (id, name, key_hash, skip_webhooks, created_at, created_by)
                values ($1, $2, $3, $4, $5, $6)
                returning {_COLUMNS}
                """,
                key_id,
                name,
                hash_token(key),
                skip_webhooks,
                now,
                admin.actor,
            )
            data = {"api_key_id": key_id, "name": name, "skip_webhooks": skip_webhooks}
            await self._append(conn, key_id, 0, EventType.API_KEY_CREATED, data, admin, now)
        return row, key

    async def revoke(self, key_id: int, admin: Admin) -> asyncpg.Record:
        """Revoke a key; revoking a revoked key changes nothing and answers it as it is."""
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            row: asyncpg.Record | None = await conn.fetchrow(
                f"select {_COLUMNS} from shared.api_keys where id = $1 for update", key_id
            )
            if row is None:
                raise NotFound("api key", key_id)
            if row["revoked_at"] is not None:
                return row
            row = await conn.fetchrow(
                f"update shared.api_keys set revoked_at = $2 where id = $1 returning {_COLUMNS}",
                key_id,
                now,
            )
            version = await eventstore.stream_version(conn, api_key_stream(key_id))
            data = {"api_key_id": key_id}
            await self._append(conn, key_id, version, EventType.API_KEY_REVOKED, data, admin, now)
        assert row is not None
        return row

    async def list(self) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self.pool.fetch(
            f"select {_COLUMNS} from shared.api_keys order by id"
        )
        return rows

    @staticmethod
    async def _append(
        conn: asyncpg.Connection,
        key_id: int,
        version: int,
        kind: str,
        data: dict[str, Any],
        admin: Admin,
        now: datetime,
    ) -> None:
        await eventstore.append(
            conn,
            api_key_stream(key_id),
            [NewEvent(kind, data)],
            expected_version=version,
            causation=Causation.new(actor=admin.actor),
            occurred_at=now,
        )
