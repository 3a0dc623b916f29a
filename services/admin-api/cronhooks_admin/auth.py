"""Admin API tokens: created by `cronhooks admin create-token`, stored as SHA-256 only."""

from __future__ import annotations

import hashlib
import secrets
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


async def authenticate(conn: asyncpg.Connection, authorization: str | None) -> Admin | None:
    """The admin behind an ``Authorization: Bearer`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    row = await conn.fetchrow(
        "select id, name from admin.tokens where token_hash = $1 and revoked_at is null",
        hash_token(token.strip()),
    )
    return None if row is None else Admin(row["id"], row["name"])
