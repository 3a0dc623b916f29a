"""The overall retry deadline's rule (CONTRACT §17), for the two services that judge it:
the dispatcher when an attempt fails (is its retry in time?) and the scheduler when a
retry timer fires long after it was due (is it still?). Pure.

A webhook's retryDeadlineSeconds (0: none) bounds how late a delivery's retries may
start, counted from when the delivery was first requested.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from cronhooks_common.events import UNSET, UnsetType

DEADLINE_PASSED = "retry deadline passed"

# A retry timer that fires later than this after it was due was held — by a pause
# (CONTRACT §16.4), or with every scheduler down — and starts when it fires; one fired
# sooner starts, as judged when it was set, at its due time (a claim under load is late
# by milliseconds to seconds, which must not end a retry that was in time).
HELD_AFTER = timedelta(seconds=60)


def passed(deadline_seconds: int, requested_at: datetime, start: datetime) -> bool:
    """Would a retry starting at `start` start past the deadline? 0 is no deadline; a
    retry exactly at the deadline is still in time."""
    if deadline_seconds <= 0:
        return False
    return start > requested_at + timedelta(seconds=deadline_seconds)


def passed_as_carried(
    deadline_seconds: int | UnsetType, requested_at: str | UnsetType, start: datetime
) -> bool:
    """`passed` with the values as a target and a request (or a retry timer) carry them:
    an absent deadline is none, an absent request time (written before deadlines
    existed) leaves nothing to count from."""
    if deadline_seconds is UNSET or requested_at is UNSET:
        return False
    return passed(deadline_seconds, datetime.fromisoformat(requested_at), start)


def start_of(due_at: datetime, fired_at: datetime) -> datetime:
    """When a retry timer due at `due_at` and fired at `fired_at` starts (see HELD_AFTER)."""
    return fired_at if fired_at - due_at > HELD_AFTER else due_at
