"""A webhook's jitter offset (CONTRACT §13, `jitterSeconds`). Pure.

Each slot of a webhook with `jitter_seconds > 0` is sent at slot + offset, where the
offset is a fixed fraction of the window derived from the webhook id alone: the same on
every scheduler replica and after every restart, and stored nowhere. Webhooks of one herd
get offsets spread evenly over `[0, jitter_seconds)` because the hash is uniform.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from cronhooks_common.events import ConfigData

MAX_JITTER_SECONDS = 3600
_NO_OFFSET = timedelta(0)


def jitter_offset(webhook_id: int, jitter_seconds: int) -> timedelta:
    """The offset in `[0, jitter_seconds)`, to the millisecond (a whole-second grid would
    send a herd in 60 bursts instead of a flat stream)."""
    if jitter_seconds <= 0:
        return _NO_OFFSET
    # SHA-256 rather than hash(): Python salts str hashes per process, and an int's hash is
    # the int itself (consecutive ids would march through the window in order).
    digest = hashlib.sha256(f"cronhooks-jitter:{webhook_id}".encode()).digest()
    millis = int.from_bytes(digest[:8], "big") % (jitter_seconds * 1000)
    return timedelta(milliseconds=millis)


def offset_of(webhook_id: int, config: ConfigData) -> timedelta:
    """The offset of a webhook's configuration (absent from configs written before it: 0)."""
    return jitter_offset(webhook_id, int(config.get("jitter_seconds") or 0))
