"""When to try again (CONTRACT §4). Pure.

Backoff 10 s, 30 s, 90 s, … (×3 per attempt) capped at one hour; a `Retry-After` from the
agent (delta-seconds or an HTTP date) wins, bounded to a day.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

BASE = timedelta(seconds=10)
CAP = timedelta(hours=1)
MAX_RETRY_AFTER = timedelta(days=1)


def backoff(attempt: int) -> timedelta:
    """The wait after failed attempt number `attempt` (1-based)."""
    return min(BASE * 3 ** (attempt - 1), CAP) if attempt < 12 else CAP


def retry_after(header: str | None, now: datetime) -> timedelta | None:
    """The wait a Retry-After header asks for, or None if absent or unreadable."""
    if not header:
        return None
    text = header.strip()
    if text.isdigit():
        wait = timedelta(seconds=int(text))
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        wait = when - now
    return max(timedelta(0), min(wait, MAX_RETRY_AFTER))


def next_attempt_at(attempt: int, header: str | None, now: datetime) -> datetime:
    return now + (retry_after(header, now) or backoff(attempt))
