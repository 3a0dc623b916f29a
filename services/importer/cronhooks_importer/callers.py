"""Who calls the agent API (REST and GraphQL alike), and what they may do.

Today an `api_token` (CONTRACT §5): depth from the token, staged updates owned by the token
(its `jti`) and expiring with it. Tokens follow the state (§15): a token is honoured only
while its webhook exists and is enabled, and it reads and writes only what both the
token's patterns and the webhook's current patterns allow, no deeper than the webhook's
current maxDepth (scopes.py). An API key (depth 0, every path) becomes a `Caller` too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from cronhooks_common.clock import Clock
from cronhooks_common.globs import matches_any
from cronhooks_common.tokens import ApiClaims, ApiTokens, TokenError
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

    @property
    def writer(self) -> str:
        """`updated_by` of its writes: who, and for which delivery."""
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
    scopes: WebhookScopes
    clock: Clock

    async def of(self, request: web.Request) -> Caller:
        """The caller behind `Authorization: Bearer <api_token>`; `Unauthorized` otherwise."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("an api_token is required (Bearer)")
        try:
            claims = self.tokens.verify(token, now=self.clock.now())
        except TokenError as exc:
            raise Unauthorized(f"invalid api_token: {exc}") from None
        return await _token_caller(token, claims, self.scopes)


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
    )
