"""The overall retry deadline (CONTRACT §17). Pure.

A webhook's retryDeadlineSeconds (0: none) bounds how late a delivery's retries may start,
counted from when the delivery was requested: a failed attempt whose retry would start
after that time plus the deadline ends the delivery at once, failed with DEADLINE_PASSED,
however many attempts `maxRetries` still allows. Whatever set the retry's time — the
backoff or the agent's `Retry-After` — the same rule judges it (record.py, for every kind;
the rule is cronhooks_common.retry_deadline, which the scheduler also applies to a retry
held past its deadline by a pause).

The request time is the first request's own time (its event's occurred_at): `stamped`
writes it into the request before it is sent, so the attempt's outcome carries it to the
retry timer and every later request carries it on (a release of a queued delivery carries
its first request's, handon.py). A retry written before the deadline existed lacks it:
nothing to count from, no deadline.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TypeVar

import msgspec

from cronhooks_common.clock import iso
from cronhooks_common.events import UNSET, RequestFields, UnsetType
from cronhooks_common.retry_deadline import DEADLINE_PASSED, passed_as_carried
from cronhooks_dispatcher.outcome import Outcome

Request = TypeVar("Request", bound=RequestFields)


def too_late(request: RequestFields, retry_at: datetime) -> bool:
    """`passed` for the next attempt of `request`, with its webhook's deadline."""
    return passed_as_carried(request.target.retry_deadline_seconds, request.requested_at, retry_at)


def stamped(request: Request, occurred_at: datetime) -> Request:
    """`request` knowing its delivery's request time: a first request's is its own event's
    time; a release or a retry already carries its first request's."""
    if request.requested_at is not UNSET or request.attempt > 1:
        return request
    return msgspec.structs.replace(request, requested_at=iso(occurred_at))


def ended(outcome: Outcome) -> tuple[Outcome, str | UnsetType]:
    """The failed attempt's outcome worded as the delivery's end by the deadline, and the
    attempt's own error (its log keeps saying what failed)."""
    own = UNSET if outcome.error is None else outcome.error
    return dataclasses.replace(outcome, error=DEADLINE_PASSED), own
