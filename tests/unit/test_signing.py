"""Signatures over the exact bytes sent, checked against the Standard Webhooks library."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from cronhooks_common.signing import (
    SecretKeys,
    generate_secret,
    secret_problem,
    signature_headers,
    signing_key,
)

WHSEC = "whsec_" + base64.b64encode(b"an admin's own 32-byte key......").decode()
PLAIN = "a plain admin secret, 24+ chars"


def test_generated_secret_is_whsec_base64_of_32_bytes() -> None:
    secret = generate_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret[6:])) == 32
    assert secret_problem(secret) is None
    assert generate_secret() != secret


def test_known_answer() -> None:
    # Fixed inputs → fixed outputs, computed independently with hmac/hashlib here.
    key = b"0123456789abcdef0123456789abcdef"
    secret = "whsec_" + base64.b64encode(key).decode()
    body = b'{"version":1,"id":42}'
    headers = signature_headers(
        SecretKeys.of(secret), delivery_id="42", timestamp=1738000000, body=body, attempt=2
    )
    standard = base64.b64encode(
        hmac.new(key, b"42.1738000000." + body, hashlib.sha256).digest()
    ).decode()
    assert headers["X-Webhook-Signature"] == (
        "sha256=5ae39e98e09cc30faabb9d82e18e5790348d2d72cb132a05af032c0e74864a59"
    )
    assert headers["webhook-signature"] == f"v1,{standard}"
    assert headers["X-Webhook-ID"] == headers["webhook-id"] == "42"
    assert headers["X-Webhook-Timestamp"] == headers["webhook-timestamp"] == "1738000000"
    assert headers["X-Webhook-Attempt"] == "2"
    assert headers["User-Agent"] == "cronhooks/1.0"
    assert headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("secret", [pytest.param(generate_secret(), id="generated"), WHSEC, PLAIN])
def test_standard_webhooks_library_verifies_our_signature(secret: str) -> None:
    body = '{"version":1,"id":7,"instruction":"ünïcode ✓"}'.encode()
    now = int(datetime.now(UTC).timestamp())
    headers = signature_headers(
        SecretKeys.of(secret), delivery_id="7", timestamp=now, body=body, attempt=1
    )
    # The library takes whsec_ secrets decoded, and other secrets as their raw bytes.
    verifier = Webhook(secret) if secret.startswith("whsec_") else Webhook(secret.encode())
    payload = verifier.verify(body, {k: v for k, v in headers.items() if k.startswith("webhook-")})
    assert payload["id"] == 7


@pytest.mark.parametrize("secret", [pytest.param(generate_secret(), id="generated"), WHSEC, PLAIN])
def test_trip2g_receiver_check_verifies_our_signature(secret: str) -> None:
    """A receiver written for trip2g: HMAC-SHA256 keyed with the secret string's bytes
    (a whsec_ prefix included) over the raw body, lowercase hex, no timestamp."""
    body = '{"version":1,"id":7,"instruction":"ünïcode ✓"}'.encode()
    headers = signature_headers(
        SecretKeys.of(secret), delivery_id="7", timestamp=1738000000, body=body, attempt=1
    )
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Webhook-Signature"], expected)
    # ... and it does not depend on the timestamp (that is the Standard Webhooks set's job)
    later = signature_headers(
        SecretKeys.of(secret), delivery_id="7", timestamp=1738009999, body=body, attempt=2
    )
    assert later["X-Webhook-Signature"] == expected
    assert later["webhook-signature"] != headers["webhook-signature"]


def test_plain_secret_is_used_as_utf8_bytes() -> None:
    assert signing_key("a plain secret of 24+ chars") == b"a plain secret of 24+ chars"


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("short", "at least 24"),
        ("whsec_!!!notbase64", "base64"),
        ("whsec_" + base64.b64encode(b"x" * 8).decode(), "at least 24 bytes"),
        ("x" * 300, "at most"),
        ("a" * 23 + "\x01", "control"),
    ],
)
def test_bad_secrets_are_named(secret: str, reason: str) -> None:
    problem = secret_problem(secret)
    assert problem is not None and reason in problem
