"""Keys derived from CRONHOOKS_SECRET_KEY, and encryption of secrets at rest.

One master key, several purposes: each purpose gets its own key through HKDF, so the key
that encrypts webhook secrets is never the key that signs API tokens.

Key rotation: CRONHOOKS_SECRET_KEY_PREVIOUS names master keys that still open what they
sealed (cryptography's MultiFernet); sealing always uses the current key, and
`cronhooks secrets reseal` (cronhooks_cli.reseal) moves what is stored onto it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

if TYPE_CHECKING:
    from cronhooks_common.settings import Settings

_PURPOSE = "webhook-secrets/v1"


def derive_key(master: str, purpose: str, length: int = 32) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(),
        length=length,
        salt=b"cronhooks",
        info=purpose.encode(),
    ).derive(master.encode())


def _fernet(master: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(derive_key(master, _PURPOSE)))


class SecretBox:
    """Authenticated encryption (Fernet: AES-CBC + HMAC) of small secrets: sealed under the
    current master key, opened with the current or any previous one."""

    def __init__(self, master: str, previous: Iterable[str] = ()) -> None:
        self._current = _fernet(master)
        self._any = MultiFernet([self._current, *(_fernet(key) for key in previous)])

    @classmethod
    def of(cls, settings: Settings) -> SecretBox:
        """The box of CRONHOOKS_SECRET_KEY and CRONHOOKS_SECRET_KEY_PREVIOUS."""
        return cls(settings.secret_key, settings.secret_key_previous)

    def seal(self, plaintext: str) -> bytes:
        return self._current.encrypt(plaintext.encode())

    def open(self, ciphertext: bytes) -> str:
        try:
            return self._any.decrypt(ciphertext).decode()
        except InvalidToken:
            raise ValueError(
                "secret cannot be decrypted with this CRONHOOKS_SECRET_KEY"
                " (nor CRONHOOKS_SECRET_KEY_PREVIOUS)"
            ) from None

    def resealed(self, ciphertext: bytes) -> bytes | None:
        """`ciphertext` sealed again under the current key; None when it already is (so a
        second pass changes nothing). ValueError when no key opens it."""
        try:
            self._current.decrypt(ciphertext)
        except InvalidToken:
            pass
        else:
            return None
        try:
            return self._any.rotate(ciphertext)
        except InvalidToken:
            raise ValueError(
                "secret cannot be decrypted with this CRONHOOKS_SECRET_KEY"
                " (nor CRONHOOKS_SECRET_KEY_PREVIOUS)"
            ) from None
