"""The agent's short API token (CONTRACT §5): minted by the dispatcher, verified by the importer.

HS256 with a key derived from CRONHOOKS_SECRET_KEY. Claims: iss, aud "cronhooks-api",
sub "webhook:{id}", delivery_id, depth, read_patterns, write_patterns, iat, exp, jti,
max_depth (the webhook's maxDepth: a token deeper than that may read but not write), and
kind and trace (CONTRACT §16.3: the notes it writes name its delivery, `{kind}:{id}`, and
the change deliveries they fire continue its trace).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jwt

from cronhooks_common.crypto import derive_key

AUDIENCE = "cronhooks-api"
ALGORITHM = "HS256"


CLOCK_SKEW = timedelta(seconds=30)


class TokenError(ValueError):
    """The token is missing, forged, expired or for someone else."""


def _moment(claims: Mapping[str, object], name: str, now: datetime) -> datetime:
    """A NumericDate claim as a datetime; absurd values (10^12, NaN, a string) are refused."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"claim {name} must be a number")
    try:
        return datetime.fromtimestamp(value, tz=now.tzinfo)
    except (OverflowError, OSError, ValueError):
        raise TokenError(f"claim {name} is out of range") from None


def _decode(
    token: str,
    keys: Sequence[bytes],
    audience: str,
    issuer: str,
    now: datetime,
    *,
    allow_expired: bool = False,
) -> tuple[dict[str, Any], datetime]:
    """The verified claims of an HS256 token for `audience`, and its expiry. `keys`: the
    current key first, then those of CRONHOOKS_SECRET_KEY_PREVIOUS (tokens minted before
    a key rotation stay valid until they expire). The signature and every claim are
    checked first; `allow_expired` then lets an `exp` that has passed through (the caller
    bounds it otherwise)."""
    for key in keys:
        claims = _verified(token, key, audience, issuer)
        if claims is not None:
            break
    else:
        raise TokenError("Signature verification failed")
    expires = _moment(claims, "exp", now)
    if expires <= now and not allow_expired:
        raise TokenError("token has expired")
    if _moment(claims, "iat", now) > now + CLOCK_SKEW:
        raise TokenError("token is not yet valid (iat)")
    return claims, expires


def _verified(token: str, key: bytes, audience: str, issuer: str) -> dict[str, Any] | None:
    """The claims if `key` signed the token; None if another key did."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=audience,
            issuer=issuer,
            # Times are judged against the injected `now`, not PyJWT's wall clock.
            options={
                "require": ["exp", "iat", "sub", "aud", "iss"],
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except jwt.InvalidSignatureError:
        return None
    except jwt.PyJWTError as exc:
        raise TokenError(str(exc)) from None
    return claims


@dataclass(frozen=True, slots=True)
class ApiClaims:
    subject: str
    delivery_id: int | None
    depth: int
    read_patterns: tuple[str, ...]
    write_patterns: tuple[str, ...]
    expires_at: datetime
    max_depth: int | None = None  # the webhook's maxDepth when the token was minted
    token_id: str | None = None  # the jti: names the token (its staged updates)
    kind: str | None = None  # its delivery's kind (absent from tokens before revision 3)
    trace: str | None = None  # its delivery's trace (§16.3)


class ApiTokens:
    def __init__(
        self, *, master_key: str, issuer: str, ttl_seconds: int, previous_keys: Iterable[str] = ()
    ) -> None:
        self._key = derive_key(master_key, "api-token/v1")
        self._keys = (self._key, *(derive_key(k, "api-token/v1") for k in previous_keys))
        self._issuer = issuer
        self._ttl = timedelta(seconds=ttl_seconds)

    def mint(
        self,
        *,
        webhook_id: int,
        delivery_id: int,
        depth: int,
        read_patterns: list[str],
        write_patterns: list[str],
        now: datetime,
        max_depth: int | None = None,
        kind: str | None = None,
        trace: str | None = None,
    ) -> str:
        claims: dict[str, object] = {
            "iss": self._issuer,
            "aud": AUDIENCE,
            "sub": f"webhook:{webhook_id}",
            "delivery_id": delivery_id,
            "depth": depth,
            "read_patterns": list(read_patterns),
            "write_patterns": list(write_patterns),
            "iat": int(now.timestamp()),
            "exp": int((now + self._ttl).timestamp()),
            "jti": uuid.uuid4().hex,
        }
        if max_depth is not None:
            claims["max_depth"] = max_depth
        if kind is not None:
            claims["kind"] = kind
        if trace is not None:
            claims["trace"] = trace
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, token: str, *, now: datetime, allow_expired: bool = False) -> ApiClaims:
        """The claims of a genuine token; `TokenError` otherwise. `allow_expired`: only
        for the run endpoints (CONTRACT §16.2), which accept an expired token while its
        run is RUNNING (`ApiClaims.expires_at` says whether it has expired)."""
        claims, expires = _decode(
            token, self._keys, AUDIENCE, self._issuer, now, allow_expired=allow_expired
        )
        try:
            return ApiClaims(
                subject=str(claims["sub"]),
                delivery_id=claims.get("delivery_id"),
                depth=int(claims["depth"]),
                read_patterns=tuple(str(p) for p in claims.get("read_patterns", [])),
                write_patterns=tuple(str(p) for p in claims.get("write_patterns", [])),
                expires_at=expires,
                max_depth=None if claims.get("max_depth") is None else int(claims["max_depth"]),
                token_id=None if claims.get("jti") is None else str(claims["jti"]),
                kind=None if claims.get("kind") is None else str(claims["kind"]),
                trace=None if claims.get("trace") is None else str(claims["trace"]),
            )
        except (KeyError, TypeError, ValueError):
            raise TokenError("token claims are malformed") from None


ADMIN_AUDIENCE = "cronhooks-admin-notes"
ADMIN_TOKEN_TTL = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class AdminClaims:
    actor: str  # "admin:{id}:{name}", as admin-api names the admin
    expires_at: datetime


def is_admin_write_token(token: str) -> bool:
    """Whether a Bearer token claims to be an admin write token (then only
    `AdminWriteTokens.verify` may accept it). A routing peek, verified afterwards."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return False
    return isinstance(claims, dict) and claims.get("aud") == ADMIN_AUDIENCE


class AdminWriteTokens:
    """Admin note writes (admin GraphQL `pushNotes`/`hideNotes`, CONTRACT §8) go through the
    importer's agent API, the one code path that writes notes. admin-api mints one of these
    for each such call: valid 60 s, with a key and an audience of its own, so it can never
    pass for an api_token nor an api_token for it. It writes every path at depth 0."""

    def __init__(self, *, master_key: str, issuer: str, previous_keys: Iterable[str] = ()) -> None:
        self._key = derive_key(master_key, "admin-note-writes/v1")
        self._keys = (self._key, *(derive_key(k, "admin-note-writes/v1") for k in previous_keys))
        self._issuer = issuer

    def mint(self, *, actor: str, now: datetime) -> str:
        claims = {
            "iss": self._issuer,
            "aud": ADMIN_AUDIENCE,
            "sub": actor,
            "iat": int(now.timestamp()),
            "exp": int((now + ADMIN_TOKEN_TTL).timestamp()),
        }
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, token: str, *, now: datetime) -> AdminClaims:
        claims, expires = _decode(token, self._keys, ADMIN_AUDIENCE, self._issuer, now)
        actor = claims["sub"]
        if not isinstance(actor, str) or not actor.startswith("admin:"):
            raise TokenError("token subject is not an admin")
        return AdminClaims(actor=actor, expires_at=expires)
