"""Who calls the agent API (REST and GraphQL alike), and what they may do.

Either an `api_token` (CONTRACT §5): depth from the token, staged updates owned by the
token (its `jti`) and expiring with it. Tokens follow the state (§15): a token is honoured
only while its webhook exists and is enabled, and it reads and writes only what both the
token's patterns and the webhook's current patterns allow, no deeper than the webhook's
current maxDepth (scopes.py).

Or an API key (`X-API-Key`): depth 0, every path, staged updates owned by the key. Keys
are looked up by hash in `shared.api_keys` on every request (one index probe), so a
revocation committed before the request is seen by it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from aiohttp import web

from cronhooks_common.clock import Clock
from cronhooks_common.globs import matches_any
from cronhooks_common.tokens import (
    AdminWriteTokens,
    ApiClaims,
    ApiTokens,
    TokenError,
    is_admin_write_token,
)
from cronhooks_common.traces import Origin
from cronhooks_importer import queries
from cronhooks_importer.scopes import WebhookScopes

# A path is allowed if it matches one pattern of every set; no sets: every path.
PatternSets = tuple[tuple[str, ...], ...]


class Unauthorized(Exception):
    """No credential, or one that is forged, expired, revoked or for someone else: 401."""


@dataclass(frozen=True, slots=True)
class Caller:
    subject: str  # "webhook:7"
    delivery_id: int | None
    depth: int  # the depth its writes carry
    max_depth: int | None  # writes deeper than this are refused; None: no limit
    read_patterns: PatternSets
    write_patterns: PatternSets
    stage_owner: str  # whose staged updates (pushNotes skipCommit)
    expires_at: datetime | None  # staged updates expire with the credential
    label: str | None = None  # an API key's name, part of `writer`
    skip_webhooks: bool = False  # its batches fire no change webhook (an API key's flag)
    origin: Origin | None = None  # what its note versions say wrote them (§16.3)

    @property
    def writer(self) -> str:
        """`updated_by` of its writes: who, and for which delivery."""
        if self.label is not None:
            return f"{self.subject}:{self.label}"
        return self.subject + (f" delivery:{self.delivery_id}" if self.delivery_id else "")

    def may_read(self, path: str) -> bool:
        return all(matches_any(path, patterns) for patterns in self.read_patterns)

    def may_write(self, path: str) -> bool:
        return all(matches_any(path, patterns) for patterns in self.write_patterns)


def _webhook_id(subject: str) -> int:
    kind, _, ident = subject.partition(":")
    if kind != "webhook" or not ident.isdigit():
        raise Unauthorized("invalid api_token: its subject is not a webhook")
    return int(ident)


@dataclass(frozen=True, slots=True)
class Callers:
    """Authenticates the agent API's requests (both REST and GraphQL)."""

    tokens: ApiTokens
    admin_tokens: AdminWriteTokens
    scopes: WebhookScopes
    clock: Clock
    pool: asyncpg.Pool

    async def of(self, request: web.Request) -> Caller:
        """The caller behind `Authorization: Bearer <api_token>` or `X-API-Key: <key>`;
        `Unauthorized` otherwise."""
        key = request.headers.get("X-API-Key")
        if key is not None:
            if request.headers.get("Authorization"):
                raise Unauthorized("an api_token and an X-API-Key: send one credential")
            return await self._key_caller(key.strip())
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("an api_token (Bearer) or an X-API-Key is required")
        if is_admin_write_token(token):
            return self._admin_caller(token)
        try:
            claims = self.tokens.verify(token, now=self.clock.now())
        except TokenError as exc:
            raise Unauthorized(f"invalid api_token: {exc}") from None
        return await _token_caller(token, claims, self.scopes)

    async def token_caller(self, token: str, claims: ApiClaims) -> Caller:
        """The caller of a verified api_token; `Unauthorized` when its webhook is gone."""
        return await _token_caller(token, claims, self.scopes)

    def _admin_caller(self, token: str) -> Caller:
        """An admin's own note write, forwarded by admin-api: depth 0, every path."""
        try:
            claims = self.admin_tokens.verify(token, now=self.clock.now())
        except TokenError as exc:
            raise Unauthorized(f"invalid admin write token: {exc}") from None
        return Caller(
            subject=claims.actor,
            delivery_id=None,
            depth=0,
            max_depth=None,
            read_patterns=(),
            write_patterns=(),
            stage_owner=":".join(claims.actor.split(":", 2)[:2]),  # "admin:{id}"
            expires_at=None,
            # "admin:{id}:{name}" → "admin:{name}"; an admin's write starts no chain
            origin=Origin("admin:" + claims.actor.split(":", 2)[-1]),
        )

    async def _key_caller(self, key: str) -> Caller:
        row = await queries.live_api_key(
            self.pool, hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
        )
        if row is None:
            raise Unauthorized("invalid X-API-Key: unknown or revoked")
        return Caller(
            subject=f"api_key:{row['id']}",
            delivery_id=None,
            depth=0,
            max_depth=None,
            read_patterns=(),  # no pattern sets: every path
            write_patterns=(),
            stage_owner=f"api_key:{row['id']}",
            expires_at=None,
            label=row["name"],
            skip_webhooks=row["skip_webhooks"],
            origin=Origin(f"api_key:{row['name']}"),  # starts no chain (§16.3)
        )


async def _token_caller(token: str, claims: ApiClaims, scopes: WebhookScopes) -> Caller:
    scope = await scopes.of(_webhook_id(claims.subject))
    if not scope.live:
        raise Unauthorized("api_token revoked: its webhook was deleted or is disabled")
    max_depth = scope.max_depth
    if claims.max_depth is not None:
        max_depth = min(max_depth, claims.max_depth)
    # A token without a jti still owns its staged updates: the token's own hash.
    owner = claims.token_id or hashlib.sha256(token.encode()).hexdigest()[:32]
    return Caller(
        subject=claims.subject,
        delivery_id=claims.delivery_id,
        depth=claims.depth,
        max_depth=max_depth,
        read_patterns=(claims.read_patterns, scope.read_patterns),
        write_patterns=(claims.write_patterns, scope.write_patterns),
        stage_owner=f"token:{owner}",
        expires_at=claims.expires_at,
        origin=_delivery_origin(claims),
    )


def _delivery_origin(claims: ApiClaims) -> Origin | None:
    """The delivery a token was minted for, whose chain its writes continue; None for a
    token minted before revision 3 (no kind: its delivery cannot be named)."""
    if claims.delivery_id is None or claims.kind is None:
        return None
    return Origin.delivery(claims.kind, claims.delivery_id, claims.trace)
