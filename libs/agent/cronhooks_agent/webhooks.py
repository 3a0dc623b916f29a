"""Verify a cron-webhook delivery (CONTRACT §3, §17), under either header scheme: HMAC
(`v1`) with the secret, or Ed25519 (`v1a`) with the webhook's `whpk_` public key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TOLERANCE_SECONDS = 300
PUBLIC_KEY_PREFIX = "whpk_"


class SignatureError(ValueError):
    """The request is not signed with this secret, or is too old or too new."""


def _standard_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[6:])
    return secret.encode()


def _public_key(text: str) -> Ed25519PublicKey:
    """A `whpk_` public key (base64 of the 32 raw bytes)."""
    try:
        raw = base64.b64decode(text.removeprefix(PUBLIC_KEY_PREFIX), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError):
        raise ValueError("public_key must be whpk_ + base64 of 32 bytes") from None


def _ed25519_valid(key: Ed25519PublicKey, signature: str, message: bytes) -> bool:
    try:
        key.verify(base64.b64decode(signature, validate=True), message)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def verify_webhook(
    secret: str | None,
    headers: Mapping[str, str],
    body: bytes,
    *,
    public_key: str | None = None,
    now: float | None = None,
    accept_unstamped: bool = False,
) -> None:
    """Raise `SignatureError` unless `body` carries a valid signature for `secret` (HMAC,
    `v1`) or for `public_key` (`whpk_…`, an ED25519 webhook's `v1a`); give either or both.

    The Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`)
    are checked when present: they cover the timestamp, so an old request replayed is
    refused. `webhook-signature` may carry several space-separated signatures (during a
    rotation's grace, the new and the old secret's): one valid entry is enough.

    `X-Webhook-Signature: sha256=<hex HMAC(secret's UTF-8 bytes, body)>` (trip2g's scheme)
    covers the body only: a captured request could be replayed at any time. It is accepted
    alone only with ``accept_unstamped=True`` (a sender that signs nothing else); otherwise
    stripping the Standard Webhooks headers could not downgrade a replayed request.
    """
    if secret is None and public_key is None:
        raise ValueError("give the webhook's secret or its public key")
    verifier = None if public_key is None else _public_key(public_key)
    lower: dict[str, str] = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    if "webhook-signature" in lower:
        msg_id, stamp = lower.get("webhook-id", ""), lower.get("webhook-timestamp", "")
        _check_time(stamp, now)
        signed = f"{msg_id}.{stamp}.".encode() + body
        expected = None
        if secret is not None:
            expected = hmac.new(_standard_key(secret), signed, hashlib.sha256).digest()
        for candidate in lower["webhook-signature"].split():
            version, _, signature = candidate.partition(",")
            if version == "v1a" and verifier is not None:
                if _ed25519_valid(verifier, signature, signed):
                    return
            elif version == "v1" and expected is not None:
                try:
                    if hmac.compare_digest(expected, base64.b64decode(signature)):
                        return
                except (binascii.Error, ValueError):
                    continue
        raise SignatureError("no valid webhook-signature")
    if "x-webhook-signature" in lower and secret is not None:
        if not accept_unstamped:
            raise SignatureError(
                "only X-Webhook-Signature, which does not cover the timestamp;"
                " pass accept_unstamped=True to accept it"
            )
        expected_hex = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        given = str(lower["x-webhook-signature"]).removeprefix("sha256=")
        if hmac.compare_digest(expected_hex.encode(), given.encode("utf-8", "replace")):
            return
        raise SignatureError("X-Webhook-Signature does not match")
    raise SignatureError("the request carries no signature")


def _check_time(stamp: str, now: float) -> None:
    if not stamp.isdigit():
        raise SignatureError("missing or malformed timestamp")
    if abs(now - int(stamp)) > TOLERANCE_SECONDS:
        raise SignatureError("timestamp outside the tolerance window")
