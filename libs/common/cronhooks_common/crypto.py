"""Keys derived from CRONHOOKS_SECRET_KEY, and encryption of secrets at rest.

One master key, several purposes: each purpose gets its own key through HKDF, so the key
that encrypts webhook secrets is never the key that signs API tokens.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def derive_key(master: str, purpose: str, length: int = 32) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(),
        length=length,
        salt=b"cronhooks",
        info=purpose.encode(),
    ).derive(master.encode())


class SecretBox:
    """Authenticated encryption (Fernet: AES-CBC + HMAC) of small secrets."""

    def __init__(self, master: str) -> None:
        key = derive_key(master, "webhook-secrets/v1")
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, plaintext: str) -> bytes:
        return self._fernet.encrypt(plaintext.encode())

    def open(self, ciphertext: bytes) -> str:
        try:
            return self._fernet.decrypt(ciphertext).decode()
        except InvalidToken:
            raise ValueError("secret cannot be decrypted with this CRONHOOKS_SECRET_KEY") from None
