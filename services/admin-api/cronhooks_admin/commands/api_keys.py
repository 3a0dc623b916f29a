"""API keys (CONTRACT §5): the command side and the admin's list.

A key is created by an admin, shown once, and kept only as its SHA-256 in
`shared.api_keys`, written in the transaction that appends the key's event
(`api_key.created`, `api_key.revoked` on stream `api_key-{id}`). The importer reads that
table on each request that sends `X-API-Key`: a revocation holds from its commit on.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, TypedDict

import asyncpg

from cronhooks_admin.auth import Admin, hash_token
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.store import record, record_next
from cronhooks_admin.errors import InputError, NotFound
from cronhooks_common.clock import Clock
from cronhooks_common.events import ApiKeyCreated, ApiKeyRevoked, api_key_stream

API_KEY_PREFIX = "chk_"
MAX_NAME = 200


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


class CreateApiKeyInput(TypedDict):
    """`createApiKey`'s input as Ariadne hands it over (its defaults filled in)."""

    name: str  # judged by check_name
    skip_webhooks: bool


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

    async def create(self, fields: CreateApiKeyInput, admin: Admin) -> tuple[asyncpg.Record, str]:
        """A new key: (its row, the key itself, which is never shown again)."""
        name = check_name(fields.get("name"))
        skip_webhooks = bool(fields.get("skip_webhooks", False))
        key = new_api_key()
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            key_id: int = await conn.fetchval(sql.NEXT_API_KEY_ID)
            row: asyncpg.Record = await conn.fetchrow(
                sql.INSERT_API_KEY, key_id, name, hash_token(key), skip_webhooks, now, admin.actor
            )
            created = ApiKeyCreated(api_key_id=key_id, name=name, skip_webhooks=skip_webhooks)
            await record(conn, api_key_stream(key_id), 0, [created], actor=admin.actor, now=now)
        return row, key

    async def revoke(self, key_id: int, admin: Admin) -> asyncpg.Record:
        """Revoke a key; revoking a revoked key changes nothing and answers it as it is."""
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            row: asyncpg.Record | None = await conn.fetchrow(sql.API_KEY_FOR_UPDATE, key_id)
            if row is None:
                raise NotFound("api key", key_id)
            if row["revoked_at"] is not None:
                return row
            row = await conn.fetchrow(sql.REVOKE_API_KEY, key_id, now)
            revoked = ApiKeyRevoked(api_key_id=key_id)
            await record_next(conn, api_key_stream(key_id), revoked, actor=admin.actor, now=now)
        assert row is not None
        return row

    async def list(self) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self.pool.fetch(sql.API_KEYS)
        return rows
