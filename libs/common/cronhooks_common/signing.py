"""Webhook secrets and request signatures (CONTRACT §3).

Two header sets sign the exact bytes sent:
* ``X-Webhook-Signature: sha256=<hex HMAC(K, "{timestamp}.{body}")>``
* Standard Webhooks: ``webhook-signature: v1,<base64 HMAC(K, "{id}.{timestamp}.{body}")>``
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

SECRET_PREFIX = "whsec_"
MIN_PLAIN_SECRET = 24
MAX_SECRET = 256
USER_AGENT = "cronhooks/1.0"


def generate_secret() -> str:
    """``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(32)).decode()


def secret_problem(secret: str) -> str | None:
    """Why `secret` cannot be used, or None if it can."""
    if len(secret) > MAX_SECRET:
        return f"must be at most {MAX_SECRET} characters"
    if secret.startswith(SECRET_PREFIX):
        try:
            key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            return "whsec_ secrets must be base64 after the prefix"
        if len(key) < 24:
            return "whsec_ secrets must decode to at least 24 bytes"
        return None
    if len(secret) < MIN_PLAIN_SECRET:
        return f"must be at least {MIN_PLAIN_SECRET} characters (or whsec_ + base64)"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in secret):
        return "must not contain control characters"
    return None


def signing_key(secret: str) -> bytes:
    """K: the decoded bytes of a ``whsec_`` secret, else the secret's UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        return base64.b64decode(secret[len(SECRET_PREFIX) :])
    return secret.encode()


def signature_headers(
    key: bytes, *, delivery_id: str, timestamp: int, body: bytes, attempt: int
) -> dict[str, str]:
    """Every header of a webhook request that depends on the body and the attempt."""
    legacy = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    standard = base64.b64encode(
        hmac.new(key, f"{delivery_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    ).decode()
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Webhook-ID": delivery_id,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Signature": f"sha256={legacy}",
        "X-Webhook-Attempt": str(attempt),
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{standard}",
    }
