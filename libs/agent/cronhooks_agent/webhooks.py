"""Verify a cron-webhook delivery (CONTRACT §3), under either header scheme."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    """The request is not signed with this secret, or is too old or too new."""


def _standard_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[6:])
    return secret.encode()


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    accept_unstamped: bool = False,
) -> None:
    """Raise `SignatureError` unless `body` carries a valid signature for `secret`.

    The Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature:
    v1,…`, several space-separated signatures allowed) are checked when present: they cover
    the timestamp, so an old request replayed is refused.

    `X-Webhook-Signature: sha256=<hex HMAC(secret's UTF-8 bytes, body)>` (trip2g's scheme)
    covers the body only: a captured request could be replayed at any time. It is accepted
    alone only with ``accept_unstamped=True`` (a sender that signs nothing else); otherwise
    stripping the Standard Webhooks headers could not downgrade a replayed request.
    """
    lower: dict[str, str] = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    if "webhook-signature" in lower:
        msg_id, stamp = lower.get("webhook-id", ""), lower.get("webhook-timestamp", "")
        _check_time(stamp, now)
        key = _standard_key(secret)
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
