"""Ed25519 (`v1a`) signatures and rotation with overlap (CONTRACT §17), checked by an
independent Ed25519 (tests.support.ed25519_ref: pure Python, RFC 8032), the Standard
Webhooks library and trip2g's HMAC, never by cronhooks' own code alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronhooks_agent import SignatureError, verify_webhook
from cronhooks_common.crypto import SecretBox
from cronhooks_common.signing import (
    SecretKeys,
    ed25519_signature,
    generate_private_key,
    generate_secret,
    public_key_text,
    signature_headers,
)
from cronhooks_common.webhook_keys import SealedKeys, open_private_key, seal_private_key
from tests.support import ed25519_ref

# RFC 8032 §7.1, TEST 1 and TEST 2.
RFC_VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
        "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e"
        "458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]
NOW = datetime.now(UTC).replace(microsecond=0)  # the library checks its tolerance on it
STAMP = int(NOW.timestamp())
BODY = b'{"version":1,"id":42}'


def entries(headers: dict[str, str]) -> list[tuple[str, bytes]]:
    return [
        (version, base64.b64decode(sig))
        for version, _, sig in (e.partition(",") for e in headers["webhook-signature"].split())
    ]


def raw_public(text: str) -> bytes:
    assert re.fullmatch(r"whpk_[A-Za-z0-9+/]{43}=", text), text
    return base64.b64decode(text.removeprefix("whpk_"))


def headers_of(keys: SecretKeys, now: datetime = NOW) -> dict[str, str]:
    return signature_headers(
        keys.at(now), delivery_id="42", timestamp=int(now.timestamp()), body=BODY, attempt=1
    )


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC_VECTORS)
def test_known_answers_of_rfc_8032(secret: str, public: str, message: str, signature: str) -> None:
    seed, msg = bytes.fromhex(secret), bytes.fromhex(message)
    # The independent implementation is right about the RFC's vectors ...
    assert ed25519_ref.public_key(seed) == bytes.fromhex(public)
    assert ed25519_ref.verify(bytes.fromhex(public), msg, bytes.fromhex(signature))
    assert not ed25519_ref.verify(bytes.fromhex(public), msg + b"x", bytes.fromhex(signature))
    # ... and cronhooks signs exactly as the RFC says (Ed25519 is deterministic).
    assert raw_public(public_key_text(seed)) == bytes.fromhex(public)
    keys = SecretKeys.of(generate_secret(), seed)
    assert keys.ed25519 is not None
    assert keys.ed25519.sign(msg) == bytes.fromhex(signature)


def test_an_ed25519_webhook_signs_only_v1a_entries_and_still_sends_trip2g_hmac() -> None:
    secret, private = generate_secret(), generate_private_key()
    headers = headers_of(SecretKeys.of(secret, private))
    public = raw_public(public_key_text(private))
    [(version, signature)] = entries(headers)
    assert version == "v1a"
    signed = f"42.{STAMP}.".encode() + BODY
    assert ed25519_ref.verify(public, signed, signature)
    assert not ed25519_ref.verify(public, signed + b" ", signature)
    expected = "sha256=" + hmac.new(secret.encode(), BODY, hashlib.sha256).hexdigest()
    assert headers["X-Webhook-Signature"] == expected
    assert (
        ed25519_signature(
            SecretKeys.of(secret, private).ed25519,  # type: ignore[arg-type]
            message_id="42",
            timestamp=STAMP,
            body=BODY,
        )
        == headers["webhook-signature"]
    )


def test_during_a_grace_both_secrets_sign_new_first_and_after_it_only_the_new() -> None:
    old, new = generate_secret(), generate_secret()
    keys = SecretKeys.of(new).with_previous(SecretKeys.of(old), NOW + timedelta(seconds=60))
    during = headers_of(keys, NOW + timedelta(seconds=59))
    assert [v for v, _ in entries(during)] == ["v1", "v1"]
    for secret in (new, old):  # each verified with its own secret by the library
        Webhook(secret).verify(BODY, during)
    assert during["X-Webhook-Signature"] == (
        "sha256=" + hmac.new(new.encode(), BODY, hashlib.sha256).hexdigest()
    )
    after = headers_of(keys, NOW + timedelta(seconds=60))  # the expiry itself: over
    assert [v for v, _ in entries(after)] == ["v1"]
    Webhook(new).verify(BODY, after)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(BODY, after)


def test_an_ed25519_rotation_signs_with_both_key_pairs() -> None:
    old, new = generate_private_key(), generate_private_key()
    keys = SecretKeys.of(generate_secret(), new).with_previous(
        SecretKeys.of(generate_secret(), old), NOW + timedelta(seconds=60)
    )
    signed = f"42.{STAMP}.".encode() + BODY
    got = entries(headers_of(keys))
    assert [v for v, _ in got] == ["v1a", "v1a"]
    assert ed25519_ref.verify(raw_public(public_key_text(new)), signed, got[0][1])
    assert ed25519_ref.verify(raw_public(public_key_text(old)), signed, got[1][1])


def test_a_previous_secret_without_a_key_pair_adds_no_v1_to_an_ed25519_webhook() -> None:
    keys = SecretKeys.of(generate_secret(), generate_private_key()).with_previous(
        SecretKeys.of(generate_secret()), NOW + timedelta(seconds=60)
    )
    assert [v for v, _ in entries(headers_of(keys))] == ["v1a"]


def test_sealed_keys_open_to_what_they_sealed_and_an_hmac_webhook_ignores_its_pair() -> None:
    box = SecretBox("a master key for the tests")
    secret, private = generate_secret(), generate_private_key()
    sealed_private = seal_private_key(box, private)
    assert private not in sealed_private and open_private_key(box, sealed_private) == private
    row = SealedKeys("ED25519", box.seal(secret), sealed_private, None, None, None)
    opened = row.open(box)
    assert (opened.raw, opened.previous) == (secret.encode(), None)
    assert opened.ed25519 is not None and opened.ed25519.private_bytes_raw() == private
    assert row._replace(scheme="HMAC").open(box) == SecretKeys.of(secret)
    expires = NOW + timedelta(seconds=5)
    previous = box.seal(generate_secret())
    rotated = row._replace(scheme="HMAC", previous_secret=previous, previous_expires_at=expires)
    assert [v for v, _ in entries(headers_of(rotated.open(box)))] == ["v1", "v1"]
    assert [v for v, _ in entries(headers_of(rotated.open(box), expires))] == ["v1"]


def test_the_sdk_verifies_v1a_with_the_public_key_and_any_one_of_several() -> None:
    old, new = generate_private_key(), generate_private_key()
    secret = generate_secret()
    keys = SecretKeys.of(secret, new).with_previous(
        SecretKeys.of(generate_secret(), old), NOW + timedelta(seconds=60)
    )
    headers = headers_of(keys)
    for private in (new, old):
        verify_webhook(None, headers, BODY, public_key=public_key_text(private), now=STAMP)
    stranger = public_key_text(generate_private_key())
    with pytest.raises(SignatureError):
        verify_webhook(None, headers, BODY, public_key=stranger, now=STAMP)
    with pytest.raises(SignatureError):  # v1a is not checked with a secret
        verify_webhook(secret, headers, BODY, now=STAMP)
    with pytest.raises(SignatureError):
        verify_webhook(None, headers, BODY + b" ", public_key=public_key_text(new), now=STAMP)
    with pytest.raises(ValueError, match="public_key"):
        verify_webhook(None, headers, BODY, public_key="whpk_nope", now=STAMP)
    hmac_headers = headers_of(
        SecretKeys.of(generate_secret()).with_previous(
            SecretKeys.of(secret), NOW + timedelta(seconds=60)
        )
    )
    verify_webhook(secret, hmac_headers, BODY, now=STAMP)  # the old one, second of two
