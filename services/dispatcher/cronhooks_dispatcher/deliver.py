"""The handlers of a delivery's attempt: `delivery.requested` is admitted (step 3,
admit.py), then signed and sent (step 4, here: payload.py builds the body,
context_notes.py reads attached notes, sender.py POSTs), judged (outcome.py) and recorded
(step 5: record.py words and writes the outcome). `delivery.released` — a queued
delivery's turn (handon.py) — was admitted when its lane was handed on: it is sent and
recorded.

The HTTP call runs outside any transaction; what follows is recorded afterwards in one
(group-committed) transaction together with the inbox row. If the process dies in
between, the broker redelivers the message and the agent sees the same (id, attempt)
again: at least once, as promised.

Nothing an agent sends can leave a delivery pending (CONTRACT §15): judging the answer
never raises, and a record the database refuses is replaced by a failed attempt saying
`internal error: …`. An event that fails however often it is handled (a bug of ours) is
ended by `fail_request`, which the consumer's poison hook calls before it would
dead-letter the message; the scheduler's watchdog is the last resort.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from datetime import datetime, timedelta

import structlog
from prometheus_client import Counter, Gauge, Histogram

from cronhooks_common import logs
from cronhooks_common.consumer import TRANSIENT
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import (
    DeliveryReleased,
    DeliveryRequested,
    Event,
    RequestFields,
    storable,
)
from cronhooks_common.signing import SecretKeys, signature_headers
from cronhooks_common.traces import delivery_ref, trace_of, traceparent
from cronhooks_common.webhook_keys import SealedKeys
from cronhooks_dispatcher import context_notes, deadline, payload, runs, sender
from cronhooks_dispatcher.admit import admit
from cronhooks_dispatcher.attempt import Attempt
from cronhooks_dispatcher.deps import Call, Deps, Fault
from cronhooks_dispatcher.outcome import classify
from cronhooks_dispatcher.record import (
    Record,
    changes_received,
    failed_by_fault,
    finished,
)
from cronhooks_dispatcher.retry import next_attempt_at

log = structlog.get_logger(__name__)

MAX_LOGGED_RESPONSE = 64 << 10

ATTEMPTS = Counter("cronhooks_dispatcher_attempts_total", "HTTP attempts", ["outcome"])
DURATION = Histogram(
    "cronhooks_dispatcher_attempt_seconds",
    "Duration of HTTP attempts",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)
FIRE_LAG = Histogram(
    "cronhooks_dispatcher_fire_lag_seconds",
    "From a slot (plus its jitter offset) to the start of its first POST",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
IN_FLIGHT = Gauge("cronhooks_dispatcher_in_flight", "HTTP attempts in progress")


class SigningKeys:
    """The signing keys of each sealed secret, derived once. Opening a secret (Fernet) costs
    as much as signing the request; a herd signs with the same secrets over and over. Keyed
    by the sealed values (secret, Ed25519 private key, previous ones and their expiry): a
    rotated secret is a new entry, the old one ages out. An expired previous secret is
    dropped at signing time (`keys.at(now)`), so a warm entry never outlives its grace."""

    def __init__(self, box: SecretBox, size: int = 20_000) -> None:
        self.of: Callable[[SealedKeys], SecretKeys] = functools.lru_cache(maxsize=size)(
            lambda sealed: sealed.open(box)
        )


async def deliver_requested(call: Call, event: Event, request: DeliveryRequested) -> None:
    with logs.bound(delivery_id=request.delivery_id, webhook_id=request.webhook_id):
        if call.handled:
            return
        if not await admit(call.deps, event, request):
            return  # skipped, or waits (delivery.queued): recorded by `admit`
        await _attempt(call, event, request, first=True)


def _observe_lag(request: DeliveryRequested, started_at: datetime) -> None:
    if request.trigger == "schedule" and request.scheduled_for:
        # From the time the slot was due to leave: the slot + its jitter offset.
        due = datetime.fromisoformat(request.scheduled_for) + timedelta(
            milliseconds=request.jitter_offset_ms or 0
        )
        FIRE_LAG.observe(max((started_at - due).total_seconds(), 0.0))


async def deliver_released(call: Call, event: Event, released: DeliveryReleased) -> None:
    """A queued delivery's turn: its first attempt, after the release."""
    with logs.bound(delivery_id=released.delivery_id, webhook_id=released.webhook_id):
        if not call.handled:
            await _attempt(call, event, released)


async def fail_request(
    fault: Fault, event: Event, request: DeliveryRequested | DeliveryReleased
) -> None:
    """End the delivery of a poison request or release: it fails for good with `internal
    error: …` — not retried, as the same event would fail the same way — and releases its
    lanes."""
    now = fault.deps.clock.now()
    attempt = Attempt(request, now, "", None, None, 0)
    await fault.deps.writer.write(failed_by_fault(event, attempt, fault.error, now, final=True))


async def _attempt(
    call: Call, event: Event, request: RequestFields, *, first: bool = False
) -> None:
    """One HTTP attempt of `request`, recorded after `event` (the request, or the
    release of a queued delivery) on the delivery's stream.

    It goes when its destination's limits and holds let it (CONTRACT §17,
    destination_gates.py), in request order (`event`'s time); it is signed and timed from
    then on. A 429 or 503 with Retry-After holds the destination for every delivery
    (destination_sync.py); only this attempt fails for it."""
    deps = call.deps
    request = deadline.stamped(request, event.occurred_at)  # its retries' deadline (§17)
    url = request.target.url
    slot = await deps.gates.acquire(url, request.delivery_id, event.occurred_at)
    try:
        try:
            started_at = deps.clock.now()
            if first and isinstance(request, DeliveryRequested):
                _observe_lag(request, started_at)
            attempt, result = await send(deps, request, call.sealed_secret, started_at)
        finally:
            deps.gates.release(slot)
        await deps.holds.hold(url, result.status, result.retry_after)
        await _record(deps, event, attempt, result)
    finally:
        # Told as held until its outcome is stored: between the answer and the commit the
        # watchdog, whose deadline a long wait may have moved to any instant, must not
        # find it without an outcome and abandon it.
        deps.gates.recorded(slot)


async def _record(deps: Deps, event: Event, attempt: Attempt, result: sender.HttpResult) -> None:
    """Step 5 for one attempt: its outcome judged and written, whatever the agent sent."""
    try:
        ended = _judged(event, attempt, result, deps.clock.now())
    except Exception as exc:  # whatever the agent sent, the attempt ends
        log.error("attempt_judging_failed", error=repr(exc))
        ended = _failed_by_fault(deps, event, attempt, exc)
    try:
        await deps.writer.write(ended)
    except TRANSIENT:
        raise
    except Exception as exc:
        # The database refused the record: something in what the agent sent (or a bug
        # of ours). The attempt still ends, failed, without the bodies it came with.
        log.error("attempt_record_refused", error=repr(exc))
        await deps.writer.write(_failed_by_fault(deps, event, attempt, exc))


def _judged(event: Event, attempt: Attempt, result: sender.HttpResult, now: datetime) -> Record:
    """The record of an attempt whose answer is `result` (outcome.py judges it)."""
    judged = classify(result)
    ATTEMPTS.labels("success" if judged.succeeded else "failed").inc()
    if judged.report:  # the answer's costs and logs go with the attempt, judged as it may
        attempt = dataclasses.replace(attempt, report=judged.report)
    if judged.succeeded and judged.changes is not None:
        return changes_received(event, attempt, judged.changes)
    retry_at = next_attempt_at(attempt.request.attempt, result.retry_after, now)
    # a 202 to a request with a token: the delivery succeeded and its run started (§16.2)
    return runs.started(finished(event, attempt, judged, retry_at), now)


def _failed_by_fault(deps: Deps, event: Event, attempt: Attempt, error: Exception) -> Record:
    retry_at = next_attempt_at(attempt.request.attempt, None, deps.clock.now())
    return failed_by_fault(event, attempt, error, retry_at)


async def send(
    deps: Deps, request: RequestFields, sealed: SealedKeys | None, started_at: datetime
) -> tuple[Attempt, sender.HttpResult]:
    """Step 4, sign and send one attempt: what it sent and got, and the answer."""
    if sealed is None:
        body = payload.build_body(
            request, timestamp=int(started_at.timestamp()), api_token=None, api_url=None
        )
        recorded = payload.redacted(body)
        result = sender.HttpResult(None, b"", "webhook has no secret", 0)
    else:
        IN_FLIGHT.inc()
        try:
            recorded, result = await _post(deps, request, deps.keys.of(sealed), started_at)
        finally:
            IN_FLIGHT.dec()
    request_body, truncated = payload.cut(recorded)
    attempt = Attempt(
        request=request,
        started_at=started_at,
        request_body=request_body,
        request_body_truncated=truncated,
        response_status=result.status,
        response_body=(
            storable(result.body[:MAX_LOGGED_RESPONSE].decode("utf-8", "replace"))
            if result.status is not None
            else None
        ),
        duration_ms=result.duration_ms,
    )
    DURATION.observe(result.duration_ms / 1000)
    return attempt, result


async def _post(
    deps: Deps, request: RequestFields, keys: SecretKeys, now: datetime
) -> tuple[str, sender.HttpResult]:
    """POST the signed request; (the body as recorded, what came back)."""
    target = request.target
    timestamp = int(now.timestamp())
    trace = trace_of(request)
    token = None
    if target.pass_api_key:
        token = deps.tokens.mint(
            webhook_id=request.webhook_id,
            delivery_id=request.delivery_id,
            depth=(request.depth or 0) + 1,
            read_patterns=target.read_patterns,
            write_patterns=target.write_patterns,
            now=now,
            max_depth=target.max_depth,
            # what the token writes names this delivery and continues its trace (§16.3)
            kind=request.kind,
            trace=trace,
        )
    # attachNotes: the notes as they are now, for this attempt (one query per batch of
    # sends; a webhook without attachNotes asks nothing).
    attach = context_notes.key_of(target)
    context = None if attach is None else await deps.context.load(attach)
    body = payload.build_body(
        request, timestamp=timestamp, api_token=token, api_url=deps.api_url, context=context
    )
    raw = payload.encode(body)
    headers = signature_headers(
        keys.at(now),
        delivery_id=str(request.delivery_id),
        timestamp=timestamp,
        body=raw,
        attempt=request.attempt,
    )
    headers["traceparent"] = traceparent(trace, delivery_ref(request.kind, request.delivery_id))
    result = await sender.post(
        deps.http,
        target.url,
        body=raw,
        headers=headers,
        timeout_seconds=float(target.timeout_seconds),
        allow_private=deps.allow_private,
    )
    return payload.recorded(body, raw), result
