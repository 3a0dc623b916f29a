"""Signing keys for fire JWTs (CONTRACT §9), generated on first use, stored encrypted.

`CRONHOOKS_FIRE_JWT_ALGORITHM` chooses the algorithm: RS256 (RSA 2048, the default, what
hermes' verifier accepts), ES256 (P-256) or EdDSA (Ed25519). Exactly one key is active
(a partial unique index is the backstop). Changes of the active key (the first key, a
switch of algorithm, `rotate`) are serialised by a transaction-level advisory lock, so
concurrent processes agree on one new key. A retired key stays in the JWKS for
`PUBLISH_RETIRED_FOR` after retirement, longer than any JWT it signed can live (fire JWTs
live at most 120 s, verifiers allow 30 s of leeway, signers may cache a key for a while).
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypedDict

import asyncpg
import jwt
import structlog
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from cronhooks_common.crypto import SecretBox

log = structlog.get_logger(__name__)

ALGORITHMS = ("RS256", "ES256", "EdDSA")
DEFAULT_ALGORITHM = "RS256"
MAX_TOKEN_LIFETIME = timedelta(seconds=120)
VERIFIER_LEEWAY = timedelta(seconds=30)
PUBLISH_RETIRED_FOR = MAX_TOKEN_LIFETIME + VERIFIER_LEEWAY + timedelta(minutes=5)
# Any constant works: it only has to be the same in every process that changes keys.
_KEYS_LOCK = "cronhooks.signing_keys"

SigningPrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


class FireClaims(TypedDict):
    """A fire JWT's claims (CONTRACT §9), as the dispatcher signs them."""

    iss: str
    aud: str  # agent:{instanceId}
    purpose: Literal["cron_fire"]
    job_id: str
    fire_at: str  # as provisioned
    iat: int
    nbf: int
    exp: int
    jti: str


class Jwks(TypedDict):
    """`/.well-known/jwks.json`: the public keys, each as `public_jwk` wrote it."""

    keys: list[dict[str, object]]


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    algorithm: str
    private_key: SigningPrivateKey

    def sign(self, claims: FireClaims) -> str:
        return jwt.encode(  # (PyJWT's payload type is a plain dict: one copy per fire)
            dict(claims), self.private_key, algorithm=self.algorithm, headers={"kid": self.kid}
        )


def generate_private_key(algorithm: str) -> SigningPrivateKey:
    if algorithm == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"unsupported fire JWT algorithm {algorithm!r}")


def public_jwk(private: SigningPrivateKey, *, kid: str, algorithm: str) -> dict[str, object]:
    """The public half as a JWK with `kid`, `alg` and `use: sig` (CONTRACT §9); the other
    members are PyJWT's for the key type (RFC 7518 §6). Stored and published, not read."""
    public = private.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        jwk = dict(RSAAlgorithm.to_jwk(public, as_dict=True))
    elif isinstance(public, ec.EllipticCurvePublicKey):
        jwk = dict(ECAlgorithm.to_jwk(public, as_dict=True))
    else:
        jwk = dict(OKPAlgorithm.to_jwk(public, as_dict=True))
    # RFC 7517 §4.3: `use` and `key_ops` should not both be present; verifiers read `use`.
    jwk.pop("key_ops", None)
    jwk.update({"kid": kid, "alg": algorithm, "use": "sig"})
    return jwk


# Opened keys by their sealed row: reading a PEM costs ~30-70 ms for RSA 2048 (the key's
# consistency checks), as much as two hundred signatures, and a signer asks for the active
# key every 30 s. A sealed row always opens to the same key, so it is opened once (keys
# are few: the active one and recently retired ones).
@functools.lru_cache(maxsize=64)
def _open_private(box: SecretBox, sealed: bytes) -> SigningPrivateKey:
    return _load_private(box.open(sealed))


def _load_private(pem: str) -> SigningPrivateKey:
    private: PrivateKeyTypes = serialization.load_pem_private_key(pem.encode(), None)
    if not isinstance(
        private, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    ):
        raise ValueError(f"unexpected signing key type {type(private).__name__}")
    return private


async def _active_row(conn: asyncpg.Connection) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "select kid, algorithm, private_key from shared.signing_keys where retired_at is null"
    )


async def _retire_active(conn: asyncpg.Connection, now: datetime) -> str | None:
    kid: str | None = await conn.fetchval(
        "update shared.signing_keys set retired_at = $1 where retired_at is null returning kid",
        now,
    )
    return kid


async def _insert_key(conn: asyncpg.Connection, box: SecretBox, algorithm: str) -> str:
    private = generate_private_key(algorithm)
    kid = uuid.uuid4().hex[:16]
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    await conn.execute(
        "insert into shared.signing_keys (kid, algorithm, private_key, public_jwk)"
        " values ($1, $2, $3, $4)",
        kid,
        algorithm,
        box.seal(pem),
        public_jwk(private, kid=kid, algorithm=algorithm),
    )
    return kid


async def _lock(conn: asyncpg.Connection) -> None:
    await conn.execute("select pg_advisory_xact_lock(hashtext($1))", _KEYS_LOCK)


async def active_key(
    conn: asyncpg.Connection, box: SecretBox, *, algorithm: str, now: datetime
) -> SigningKey:
    """The key that signs now: created if there is none, replaced if its algorithm is not
    `algorithm` (the configuration changed); the replaced key stays published."""
    row = await _active_row(conn)
    if row is None or row["algorithm"] != algorithm:
        async with conn.transaction():
            await _lock(conn)
            # Under the lock, look again: another process may have made the key meanwhile.
            row = await _active_row(conn)
            if row is None or row["algorithm"] != algorithm:
                retired = await _retire_active(conn, now)
                kid = await _insert_key(conn, box, algorithm)
                log.info("signing_key_created", kid=kid, algorithm=algorithm, retired=retired)
                row = await _active_row(conn)
    assert row is not None
    return SigningKey(row["kid"], row["algorithm"], _open_private(box, row["private_key"]))


async def rotate(
    conn: asyncpg.Connection, box: SecretBox, *, algorithm: str, now: datetime
) -> tuple[str, str]:
    """Retire the active key and activate a new `algorithm` one; (retired kid, new kid)."""
    async with conn.transaction():
        await _lock(conn)
        retired = await _retire_active(conn, now)
        kid = await _insert_key(conn, box, algorithm)
    return retired or "", kid


async def published_jwks(conn: asyncpg.Connection, *, now: datetime) -> Jwks:
    """The JWKS: the active key and keys retired recently enough to verify live tokens."""
    rows = await conn.fetch(
        """
        select public_jwk from shared.signing_keys
        where retired_at is null or retired_at > $1
        order by created_at desc, retired_at desc nulls first
        """,
        now - PUBLISH_RETIRED_FOR,
    )
    return {"keys": [r["public_jwk"] for r in rows]}
