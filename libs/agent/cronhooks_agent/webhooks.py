"""Verify a cron-webhook delivery (CONTRACT §3), under either header scheme."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping
from typing import Any

TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    """The request is not signed with this secret, or is too old or too new."""


def _key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[6:])
    return secret.encode()


def verify_webhook(
    secret: str, headers: Mapping[str, str], body: bytes, *, now: float | None = None
) -> None:
    """Raise `SignatureError` unless `body` carries a valid signature for `secret`.

    Accepts the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
    `webhook-signature: v1,…`, several space-separated signatures allowed) or the
    `X-Webhook-Timestamp` / `X-Webhook-Signature: sha256=…` pair.
    """
    lower: dict[str, Any] = {k.lower(): v for k, v in headers.items()}
    key = _key(secret)
    now = time.time() if now is None else now
    if "webhook-signature" in lower:
        msg_id, stamp = lower.get("webhook-id", ""), lower.get("webhook-timestamp", "")
        _check_time(stamp, now)
        expected = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
        for candidate in lower["webhook-signature"].split():
            version, _, signature = candidate.partition(",")
            try:
                if version == "v1" and hmac.compare_digest(expected, base64.b64decode(signature)):
                    return
            except (binascii.Error, ValueError):
                continue
        raise SignatureError("no valid webhook-signature")
    if "x-webhook-signature" in lower:
        stamp = lower.get("x-webhook-timestamp", "")
        _check_time(stamp, now)
        expected_hex = hmac.new(key, f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
        given = lower["x-webhook-signature"].removeprefix("sha256=")
        if hmac.compare_digest(expected_hex, given):
            return
        raise SignatureError("X-Webhook-Signature does not match")
    raise SignatureError("the request carries no signature")


def _check_time(stamp: str, now: float) -> None:
    if not stamp.isdigit():
        raise SignatureError("missing or malformed timestamp")
    if abs(now - int(stamp)) > TOLERANCE_SECONDS:
        raise SignatureError("timestamp outside the tolerance window")
