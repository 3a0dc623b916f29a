"""Admin API tokens: created by `cronhooks admin create-token`, stored as SHA-256 only."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

import asyncpg

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


async def create_token(conn: asyncpg.Connection, name: str) -> str:
    """Create a token named `name` and return it; only its hash is kept."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    await conn.execute(
        "insert into admin.tokens (name, token_hash) values ($1, $2)", name, hash_token(token)
    )
    return token


class Authenticator:
    """The admin behind an ``Authorization: Bearer`` header, or None.

    A token found valid is remembered for `ttl` seconds (a database round trip saved on
    every request); unknown tokens are never cached, so a new token works at once.
    """

    def __init__(self, pool: asyncpg.Pool, *, ttl: float = 5.0) -> None:
        self._pool = pool
        self._ttl = ttl
        self._known: dict[str, tuple[Admin, float]] = {}

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
            return cached[0]
        row = await self._pool.fetchrow(
            "select id, name from admin.tokens where token_hash = $1 and revoked_at is null",
            digest,
        )
        if row is None:
            self._known.pop(digest, None)
            return None
        admin = Admin(row["id"], row["name"])
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[digest] = (admin, now + self._ttl)
        return admin
