"""When to try again (CONTRACT §4, §15). Pure.

Backoff 10 s, 30 s, 90 s, … (×3 per attempt) capped at one hour. A `Retry-After` from the
agent wins when it can be read: ASCII digits (any number of them) or an HTTP date in the
future, honoured up to MAX_RETRY_AFTER. Anything else — a sign, other Unicode digits
("²", "٣"), a past date, a date the parser chokes on — is no answer at all: the usual
backoff. The header is the agent's, so reading it never raises: a delivery (or a fire)
whose answer cannot be judged would wait for nothing (the review's 5,000-digit value
overflowed `int()`, `²` passed `str.isdigit()`), and one within a day-long cap held its
execution group for a day.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

BASE = timedelta(seconds=10)
CAP = timedelta(hours=1)
MAX_RETRY_AFTER = timedelta(hours=1)

_SECONDS = re.compile(r"[0-9]+", re.ASCII)
# More digits than this are more than MAX_RETRY_AFTER whatever they say (and converting
# thousands of digits to int is refused by Python or slow): no conversion needed.
_MAX_DIGITS = len(str(int(MAX_RETRY_AFTER.total_seconds())))


def backoff(attempt: int) -> timedelta:
    """The wait after failed attempt number `attempt` (1-based)."""
    return min(BASE * 3 ** (attempt - 1), CAP) if attempt < 12 else CAP


def retry_after(header: str | None, now: datetime) -> timedelta | None:
    """The wait a Retry-After header asks for, at most MAX_RETRY_AFTER; None if absent or
    not readable as delta-seconds or a future HTTP date. Never raises."""
    if not header:
        return None
    text = header.strip()
    if _SECONDS.fullmatch(text):
        digits = text.lstrip("0")
        if len(digits) > _MAX_DIGITS:
            return MAX_RETRY_AFTER
        return min(timedelta(seconds=int(digits or "0")), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None or when <= now:
        return None  # a past date is no answer: the usual backoff
    return min(when - now, MAX_RETRY_AFTER)


def next_attempt_at(attempt: int, header: str | None, now: datetime) -> datetime:
    return now + wait_before(header, now, backoff(attempt))


def wait_before(header: str | None, now: datetime, usual: timedelta) -> timedelta:
    """The agent's wait when it asks for one, else `usual`. `Retry-After: 0` asks for none:
    the usual backoff, so an agent answering `503` + `0` cannot make a fire (retried for 15
    minutes) or a delivery retry in a tight loop."""
    return retry_after(header, now) or usual
