"""Webhook secrets and request signatures (CONTRACT §3).

Two header sets sign the exact bytes sent:
* ``X-Webhook-Signature: sha256=<hex HMAC(utf8(secret), body)>`` — trip2g's scheme, so a
  receiver written for trip2g (`computeHMAC(secret, body)`) verifies it unchanged. It does
  not cover the timestamp;
* Standard Webhooks: ``webhook-signature: v1,<base64 HMAC(K, "{id}.{timestamp}.{body}")>``
  with K the decoded bytes of a ``whsec_`` secret (else its UTF-8 bytes); or, for an
  ``ED25519`` webhook (CONTRACT §17), only ``v1a,<base64 Ed25519 signature of the same
  text>`` with the webhook's own private key. It covers the timestamp: receivers that want
  replay protection verify this one. During a rotation's grace it carries the new and the
  previous secret's signature, space-separated (new first).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass, replace
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SECRET_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"
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


def generate_private_key() -> bytes:
    """A new Ed25519 private key: its 32 raw bytes (RFC 8032 seed)."""
    return Ed25519PrivateKey.generate().private_bytes_raw()


def public_key_text(private_key: bytes) -> str:
    """``whpk_`` + base64 of the 32-byte raw public key of an Ed25519 private key."""
    public = Ed25519PrivateKey.from_private_bytes(private_key).public_key()
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode()


@dataclass(frozen=True, slots=True)
class SecretKeys:
    """The keys one webhook signs with, derived once per secret (and key pair).

    `ed25519` set: the webhook's scheme is ED25519 and `webhook-signature` carries only
    `v1a` entries; else `v1`. `previous`: the keys of the secret before a rotation with
    overlap, honoured while the clock is before `previous_until` (`at` drops them after)."""

    raw: bytes  # the secret's UTF-8 bytes, as shown to the admin: X-Webhook-Signature
    standard: bytes  # K: the Standard Webhooks key
    ed25519: Ed25519PrivateKey | None = None
    previous: SecretKeys | None = None
    previous_until: float = 0.0  # unix seconds

    @classmethod
    def of(cls, secret: str, private_key: bytes | None = None) -> SecretKeys:
        """The keys of `secret`; with `private_key` (32 raw bytes), those of an ED25519
        webhook."""
        signer = None if private_key is None else Ed25519PrivateKey.from_private_bytes(private_key)
        return cls(raw=secret.encode(), standard=signing_key(secret), ed25519=signer)

    def with_previous(self, previous: SecretKeys, until: datetime) -> SecretKeys:
        """These keys, also signing with `previous` until `until`. A previous secret that
        cannot sign under this webhook's scheme (no key pair while ED25519) adds nothing."""
        if self.ed25519 is not None and previous.ed25519 is None:
            return self
        if self.ed25519 is None:
            previous = replace(previous, ed25519=None)
        return replace(self, previous=previous, previous_until=until.timestamp())

    def at(self, now: datetime) -> SecretKeys:
        """The keys that sign at `now`: the previous secret's only before its expiry (the
        clock decides, whatever the cache or the table still holds)."""
        if self.previous is not None and now.timestamp() >= self.previous_until:
            return replace(self, previous=None, previous_until=0.0)
        return self


def trip2g_signature(raw_key: bytes, body: bytes) -> str:
    """``sha256=`` + lowercase hex HMAC-SHA256 of the raw body (trip2g's SignHMAC)."""
    return "sha256=" + hmac.new(raw_key, body, hashlib.sha256).hexdigest()


def standard_signature(key: bytes, *, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,`` + base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}`` (Standard Webhooks)."""
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def ed25519_signature(
    key: Ed25519PrivateKey, *, message_id: str, timestamp: int, body: bytes
) -> str:
    """``v1a,`` + base64 Ed25519 signature of ``{id}.{timestamp}.{body}`` (Standard
    Webhooks' asymmetric scheme)."""
    signature = key.sign(f"{message_id}.{timestamp}.".encode() + body)
    return "v1a," + base64.b64encode(signature).decode()


def webhook_signature(keys: SecretKeys, *, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: one entry per secret honoured (new first), `v1a` for
    an ED25519 webhook, `v1` otherwise."""
    entries = []
    current: SecretKeys | None = keys
    while current is not None:
        if current.ed25519 is not None:
            entries.append(
                ed25519_signature(
                    current.ed25519, message_id=message_id, timestamp=timestamp, body=body
                )
            )
        else:
            entries.append(
                standard_signature(
                    current.standard, message_id=message_id, timestamp=timestamp, body=body
                )
            )
        current = current.previous
    return " ".join(entries)


def signature_headers(
    keys: SecretKeys, *, delivery_id: str, timestamp: int, body: bytes, attempt: int
) -> dict[str, str]:
    """Every header of a webhook request that depends on the body and the attempt.
    `X-Webhook-Signature` is always the (current) secret's HMAC, whatever the scheme:
    trip2g receivers work unchanged. Pass `keys.at(now)` to leave out an expired previous
    secret."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Webhook-ID": delivery_id,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Signature": trip2g_signature(keys.raw, body),
        "X-Webhook-Attempt": str(attempt),
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": webhook_signature(
            keys, message_id=delivery_id, timestamp=timestamp, body=body
        ),
    }
