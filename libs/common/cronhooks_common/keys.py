"""Signing keys for fire JWTs: Ed25519, generated on first use, stored encrypted.

Exactly one key is active (a partial unique index decides between concurrent first
starts). `rotate` retires it and creates a new one; a retired key stays in the JWKS for
`PUBLISH_RETIRED_FOR` after retirement, longer than any JWT it signed can live (fire JWTs
live at most 120 s, and verifiers allow 30 s of leeway).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

from cronhooks_common.crypto import SecretBox

ALGORITHM = "EdDSA"
MAX_TOKEN_LIFETIME = timedelta(seconds=120)
VERIFIER_LEEWAY = timedelta(seconds=30)
PUBLISH_RETIRED_FOR = MAX_TOKEN_LIFETIME + VERIFIER_LEEWAY + timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    private_key: Ed25519PrivateKey

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.private_key, algorithm=ALGORITHM, headers={"kid": self.kid})


def _new_key_row(box: SecretBox) -> tuple[str, bytes, dict[str, Any]]:
    private = Ed25519PrivateKey.generate()
    kid = uuid.uuid4().hex[:16]
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    jwk = json.loads(OKPAlgorithm.to_jwk(private.public_key()))
    jwk.update({"kid": kid, "alg": ALGORITHM, "use": "sig"})
    return kid, box.seal(pem), jwk


async def active_key(conn: asyncpg.Connection, box: SecretBox) -> SigningKey:
    """The key that signs now, created if there is none yet."""
    row = await conn.fetchrow(
        "select kid, private_key from shared.signing_keys where retired_at is null"
    )
    if row is None:
        kid, sealed, jwk = _new_key_row(box)
        await conn.execute(
            """
            insert into shared.signing_keys (kid, algorithm, private_key, public_jwk)
            values ($1, $2, $3, $4)
            on conflict do nothing
            """,
            kid,
            ALGORITHM,
            sealed,
            jwk,
        )
        row = await conn.fetchrow(
            "select kid, private_key from shared.signing_keys where retired_at is null"
        )
    private = serialization.load_pem_private_key(box.open(row["private_key"]).encode(), None)
    assert isinstance(private, Ed25519PrivateKey)
    return SigningKey(row["kid"], private)


async def rotate(conn: asyncpg.Connection, box: SecretBox, *, now: datetime) -> tuple[str, str]:
    """Retire the active key and activate a new one; return (retired kid, new kid)."""
    async with conn.transaction():
        retired = await conn.fetchval(
            "update shared.signing_keys set retired_at = $1 where retired_at is null returning kid",
            now,
        )
        kid, sealed, jwk = _new_key_row(box)
        await conn.execute(
            "insert into shared.signing_keys (kid, algorithm, private_key, public_jwk)"
            " values ($1, $2, $3, $4)",
            kid,
            ALGORITHM,
            sealed,
            jwk,
        )
    return retired or "", kid


async def published_jwks(conn: asyncpg.Connection, *, now: datetime) -> dict[str, Any]:
    """The JWKS: the active key and keys retired recently enough to verify live tokens."""
    rows = await conn.fetch(
        """
        select public_jwk from shared.signing_keys
        where retired_at is null or retired_at > $1
        order by created_at desc
        """,
        now - PUBLISH_RETIRED_FOR,
    )
    return {"keys": [r["public_jwk"] for r in rows]}
