"""Content hashes and `expected_hash` as given (CONTRACT §5). Pure.

An `expected_hash` may be lowercase hex (as `contentHash` is shown) or base64url, padded
or not (trip2g's form): both name the same SHA-256 digest; anything else is a named error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

_HEX_HASH = re.compile(r"^[0-9a-f]{64}$")
_BASE64URL_HASH = re.compile(r"^[A-Za-z0-9_-]{43}=?$")


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def normalize_hash(value: str) -> str | None:
    """An `expected_hash` as lowercase hex, or None if it names no SHA-256 digest.

    Accepted: lowercase hex (as `contentHash` is shown) or base64url, padded or not
    (trip2g's `base64.URLEncoding` of the digest): both name the same 32 bytes."""
    if _HEX_HASH.match(value):
        return value
    if _BASE64URL_HASH.match(value):
        try:
            digest = base64.urlsafe_b64decode(value.rstrip("=") + "=")
        except (binascii.Error, ValueError):
            return None
        return digest.hex() if len(digest) == 32 else None
    return None


HASH_RULE = "expected_hash must be empty, 64 lowercase hex characters or base64url of SHA-256"


def parse_expected(expected: Any) -> tuple[str | None, str | None]:
    """(normalised expected hash, problem): None stays None (no check), "" stays ""."""
    if expected is None:
        return None, None
    if not isinstance(expected, str):
        return None, "expected_hash must be a string"
    if expected == "":
        return "", None
    normalised = normalize_hash(expected)
    return (normalised, None) if normalised is not None else (None, HASH_RULE)
