"""Webhook secrets and request signatures (CONTRACT §3).

Two header sets sign the exact bytes sent:
* ``X-Webhook-Signature: sha256=<hex HMAC(utf8(secret), body)>`` — trip2g's scheme, so a
  receiver written for trip2g (`computeHMAC(secret, body)`) verifies it unchanged. It does
  not cover the timestamp;
* Standard Webhooks: ``webhook-signature: v1,<base64 HMAC(K, "{id}.{timestamp}.{body}")>``
  with K the decoded bytes of a ``whsec_`` secret (else its UTF-8 bytes). It covers the
  timestamp: receivers that want replay protection verify this one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass

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
    try:
        secret.encode()
    except UnicodeEncodeError:
        return "must be valid Unicode text"
    return None


def signing_key(secret: str) -> bytes:
    """K: the decoded bytes of a ``whsec_`` secret, else the secret's UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        return base64.b64decode(secret[len(SECRET_PREFIX) :])
    return secret.encode()


@dataclass(frozen=True, slots=True)
class SecretKeys:
    """The two keys one webhook secret signs with, derived once per secret."""

    raw: bytes  # the secret's UTF-8 bytes, as shown to the admin: X-Webhook-Signature
    standard: bytes  # K: the Standard Webhooks key

    @classmethod
    def of(cls, secret: str) -> SecretKeys:
        return cls(raw=secret.encode(), standard=signing_key(secret))


def trip2g_signature(raw_key: bytes, body: bytes) -> str:
    """``sha256=`` + lowercase hex HMAC-SHA256 of the raw body (trip2g's SignHMAC)."""
    return "sha256=" + hmac.new(raw_key, body, hashlib.sha256).hexdigest()


def standard_signature(key: bytes, *, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,`` + base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}`` (Standard Webhooks)."""
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_headers(
    keys: SecretKeys, *, delivery_id: str, timestamp: int, body: bytes, attempt: int
) -> dict[str, str]:
    """Every header of a webhook request that depends on the body and the attempt."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Webhook-ID": delivery_id,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Signature": trip2g_signature(keys.raw, body),
        "X-Webhook-Attempt": str(attempt),
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": standard_signature(
            keys.standard, message_id=delivery_id, timestamp=timestamp, body=body
        ),
    }
