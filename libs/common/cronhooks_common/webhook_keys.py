"""A webhook's signing state as `shared.webhook_secrets` keeps it (CONTRACT §3, §17): its
scheme, its secret and Ed25519 private key sealed with CRONHOOKS_SECRET_KEY (SecretBox),
its public key, and — during a rotation's grace — the previous secret and private key,
sealed too, with the time they stop being honoured. admin-api writes it in the
transaction of the webhook's events; the dispatcher reads it with each delivery.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import NamedTuple

from cronhooks_common.crypto import SecretBox
from cronhooks_common.events.webhook import SignatureScheme
from cronhooks_common.signing import SecretKeys

SCHEMES: tuple[SignatureScheme, ...] = ("HMAC", "ED25519")
HMAC: SignatureScheme = "HMAC"
ED25519: SignatureScheme = "ED25519"
MAX_GRACE_SECONDS = 7 * 86400  # 604800


def seal_private_key(box: SecretBox, private_key: bytes) -> bytes:
    """A 32-byte Ed25519 private key sealed like secrets (as base64 text)."""
    return box.seal(base64.b64encode(private_key).decode())


def open_private_key(box: SecretBox, sealed: bytes) -> bytes:
    return base64.b64decode(box.open(sealed))


class SealedKeys(NamedTuple):
    """One webhook's row of `shared.webhook_secrets`, sealed as stored. Hashable: the
    dispatcher caches what it opens to per value (a rotation is a new value)."""

    scheme: str  # SignatureScheme
    secret: bytes
    private_key: bytes | None  # sealed; None: no key pair yet
    previous_secret: bytes | None  # sealed; None: no previous secret honoured
    previous_private_key: bytes | None
    previous_expires_at: datetime | None

    def open(self, box: SecretBox) -> SecretKeys:
        """The keys these sealed values sign with: an ED25519 webhook's private keys are
        opened, an HMAC webhook's are not needed. The previous secret stays with its
        expiry; `SecretKeys.at(now)` drops it once the clock passes it."""
        ed25519 = self.scheme == ED25519
        keys = _keys(box, self.secret, self.private_key if ed25519 else None)
        if self.previous_secret is None or self.previous_expires_at is None:
            return keys
        previous = _keys(box, self.previous_secret, self.previous_private_key if ed25519 else None)
        return keys.with_previous(previous, self.previous_expires_at)


def _keys(box: SecretBox, sealed_secret: bytes, sealed_private: bytes | None) -> SecretKeys:
    private = None if sealed_private is None else open_private_key(box, sealed_private)
    return SecretKeys.of(box.open(sealed_secret), private)
