"""Who is calling: admins and agents, each by a Bearer token stored as SHA-256 only.

Admin API tokens are created by `cronhooks admin create-token`, listed, revoked and
expired with the other `cronhooks admin` commands (CONTRACT §15). Agent tokens are
issued by createAgent / rotateAgentToken (commands/agents.py); a token replaced or of a
deleted agent is revoked for good (`invalid_client`, CONTRACT §9).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cronhooks_common.clock import Clock, SystemClock

TOKEN_PREFIX = "cha_"


@dataclass(frozen=True, slots=True)
class Admin:
    id: int
    name: str

    @property
    def actor(self) -> str:
        return f"admin:{self.id}:{self.name}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(
    conn: asyncpg.Connection, name: str, *, expires_at: datetime | None = None
) -> str:
    """Create a token named `name` and return it; only its hash is kept."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    await conn.execute(
        "insert into admin.tokens (name, token_hash, expires_at) values ($1, $2, $3)",
        name,
        hash_token(token),
        expires_at,
    )
    return token


async def list_tokens(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """Every token's id, name and dates (never the token: only its hash is kept)."""
    rows: list[asyncpg.Record] = await conn.fetch(
        "select id, name, created_at, expires_at, revoked_at from admin.tokens order by id"
    )
    return rows


async def revoke_token(conn: asyncpg.Connection, token_id: int, *, now: datetime) -> bool:
    """Revoke a live token; False if there is no such live token."""
    revoked = await conn.fetchval(
        "update admin.tokens set revoked_at = $2 where id = $1 and revoked_at is null returning id",
        token_id,
        now,
    )
    return revoked is not None


async def token_is_live(conn: asyncpg.Connection, token: str, *, now: datetime) -> bool:
    return bool(
        await conn.fetchval(
            "select true from admin.tokens where token_hash = $1 and revoked_at is null"
            " and (expires_at is null or expires_at > $2)",
            hash_token(token),
            now,
        )
    )


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    id: int
    instance_id: str
    callback_url: str

    @property
    def actor(self) -> str:
        return f"agent:{self.instance_id}"


class InvalidClient(Exception):
    """A token that was issued but is revoked for good: its agent was deleted, or
    `rotateAgentToken` replaced it."""


async def agent_for_token(pool: asyncpg.Pool, authorization: str | None) -> AgentIdentity | None:
    """The agent of a Bearer token; None if there is none or it was never issued."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    # Issued tokens are ASCII; anything else (lone surrogates included) was never issued.
    if scheme.lower() != "bearer" or not token or not token.isascii():
        return None
    token_hash = hash_token(token)
    row = await pool.fetchrow(
        "select id, instance_id, callback_url, deleted_at from admin.agents where token_hash = $1",
        token_hash,
    )
    if row is None:
        retired = await pool.fetchval(
            "select 1 from admin.agent_retired_tokens where token_hash = $1", token_hash
        )
        if retired:
            raise InvalidClient
        return None
    if row["deleted_at"] is not None:
        raise InvalidClient
    return AgentIdentity(row["id"], row["instance_id"], row["callback_url"])


class Authenticator:
    """The admin behind an ``Authorization: Bearer`` header, or None.

    A token found valid is remembered for `ttl` seconds (a database round trip saved on
    every request), so a revocation takes effect within `ttl`; its expiry is remembered
    too and holds at once. Unknown tokens are never cached, so a new token works at once.
    """

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock | None = None, ttl: float = 5.0) -> None:
        self._pool = pool
        self._clock = clock or SystemClock()
        self._ttl = ttl
        # token hash → (admin, cached until (monotonic), the token's expiry or None)
        self._known: dict[str, tuple[Admin, float, datetime | None]] = {}

    async def __call__(self, authorization: str | None) -> Admin | None:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hash_token(token.strip())
        now = time.monotonic()
        cached = self._known.get(digest)
        if cached is not None and cached[1] > now:
            admin, _, expires = cached
            if expires is None or expires > self._clock.now():
                return admin
        row = await self._pool.fetchrow(
            "select id, name, expires_at from admin.tokens where token_hash = $1"
            " and revoked_at is null and (expires_at is null or expires_at > $2)",
            digest,
            self._clock.now(),
        )
        if row is None:
            self._known.pop(digest, None)
            return None
        admin = Admin(row["id"], row["name"])
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[digest] = (admin, now + self._ttl, row["expires_at"])
        return admin
