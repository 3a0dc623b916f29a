"""Who calls the agent API (REST and GraphQL alike), and what they may do.

Today an `api_token` (CONTRACT §5): depth from the token, read/write patterns from it,
staged updates owned by the token (its `jti`) and expiring with it. An API key (depth 0,
every path) becomes a `Caller` the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from cronhooks_common.globs import matches_any
from cronhooks_common.tokens import ApiClaims, ApiTokens, TokenError


class Unauthorized(Exception):
    """No credential, or one that is forged, expired or for someone else: HTTP 401."""


@dataclass(frozen=True, slots=True)
class Caller:
    subject: str  # "webhook:7"
    delivery_id: int | None
    depth: int  # the depth its writes carry
    max_depth: int | None  # writes deeper than this are refused; None: no limit
    read_patterns: tuple[str, ...] | None  # None: every path
    write_patterns: tuple[str, ...] | None  # None: every path
    stage_owner: str  # whose staged updates (pushNotes skipCommit)
    expires_at: datetime | None  # staged updates expire with the credential

    @property
    def writer(self) -> str:
        """`updated_by` of its writes: who, and for which delivery."""
        return self.subject + (f" delivery:{self.delivery_id}" if self.delivery_id else "")

    def may_read(self, path: str) -> bool:
        return self.read_patterns is None or matches_any(path, self.read_patterns)

    @classmethod
    def of_token(cls, token: str, claims: ApiClaims) -> Caller:
        # A token without a jti still owns its staged updates: the token's own hash.
        owner = claims.token_id or hashlib.sha256(token.encode()).hexdigest()[:32]
        return cls(
            subject=claims.subject,
            delivery_id=claims.delivery_id,
            depth=claims.depth,
            max_depth=claims.max_depth,
            read_patterns=claims.read_patterns,
            write_patterns=claims.write_patterns,
            stage_owner=f"token:{owner}",
            expires_at=claims.expires_at,
        )


def caller_of(request: web.Request, tokens: ApiTokens, now: datetime) -> Caller:
    """The caller behind `Authorization: Bearer <api_token>`; `Unauthorized` otherwise."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("an api_token is required (Bearer)")
    try:
        return Caller.of_token(token, tokens.verify(token, now=now))
    except TokenError as exc:
        raise Unauthorized(f"invalid api_token: {exc}") from None
