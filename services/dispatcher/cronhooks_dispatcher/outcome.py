"""What an attempt's outcome is, and the event it is recorded as (CONTRACT §4, §6, §15):
the judging half of step 4 and the wording of step 5. Pure and total: any bytes an agent
sends judge the attempt — a success, or a failure with a reason (an answer nested deeper
than 64 levels among them) — and nothing here raises for what the agent sent.

* success → `delivery.succeeded`;
* an answer with note changes → `delivery.changes_received`: the attempt waits for the
  importer's `notes.imported` / `notes.rejected` (finish.py), then is finished;
* failure with attempts left → `delivery.attempt_failed` with `retry_at` (the scheduler
  turns it into a durable retry timer, retry.py says when); without → `delivery.failed`.

Each becomes the `Record` that record.py writes: the event that follows its cause on the
delivery's stream and what the delivery releases and counts when it has finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

import structlog
from prometheus_client import Counter

from cronhooks_common import json_input
from cronhooks_common.clock import iso
from cronhooks_common.events import (
    UNSET,
    ChangeRefused,
    DeliveryAttemptFailed,
    DeliveryChangesReceived,
    DeliveryFailed,
    DeliveryOutcome,
    DeliverySucceeded,
    Event,
    NewEvent,
    storable,
    storable_json,
)
from cronhooks_common.faults import internal_error
from cronhooks_dispatcher import handon
from cronhooks_dispatcher.health import Health
from cronhooks_dispatcher.record import Attempt, Record
from cronhooks_dispatcher.retry import next_attempt_at
from cronhooks_dispatcher.sender import HttpResult

log = structlog.get_logger(__name__)

EXCERPT = 200
ATTEMPTS = Counter("cronhooks_dispatcher_attempts_total", "HTTP attempts", ["outcome"])
DELIVERIES = Counter("cronhooks_dispatcher_deliveries_total", "Finished deliveries", ["outcome"])

Status = Literal["success", "failed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    error: str | None = None
    changes: list[Any] | None = None  # as answered: the importer's rules judge them
    gone: bool = False  # 410: the agent asks us to stop calling


# --- judging -----------------------------------------------------------------------------


def excerpt(body: bytes, limit: int = EXCERPT) -> str:
    text = storable(body.decode("utf-8", "replace").strip())
    return text if len(text) <= limit else text[:limit] + "…"


def classify(result: HttpResult) -> Outcome:
    if result.error is not None:
        return Outcome(False, result.error)
    status = result.status or 0
    if status == 410:
        return Outcome(False, "HTTP 410 Gone: the agent asked to stop this webhook", gone=True)
    if 300 <= status < 400:
        return Outcome(False, f"HTTP {status}: redirects are not followed")
    if not 200 <= status < 300:
        detail = excerpt(result.body)
        return Outcome(False, f"HTTP {status}" + (f": {detail}" if detail else ""))
    if status == 202:
        return Outcome(True)
    try:
        answer = _json_object(result.body)
    except json_input.TooDeep as exc:
        return Outcome(False, str(exc))
    if answer is None:
        return Outcome(True)  # empty or non-JSON 2xx: success, nothing to import
    if not storable_json(answer):
        return Outcome(False, "the answer contains NUL characters or invalid Unicode")
    if answer.get("status") == "error":
        message = answer.get("message")
        if message:
            return Outcome(False, f"agent reported error: {str(message)[:EXCERPT]}")
        return Outcome(False, "agent reported error")
    changes = answer.get("changes")
    if changes is None or changes == []:
        return Outcome(True)
    if not isinstance(changes, list):
        return Outcome(False, "answer's changes must be an array")
    return Outcome(True, changes=changes)


def rejected(errors: list[ChangeRefused]) -> Outcome:
    """The attempt's outcome when the importer rejected its changes."""
    # An error about the whole batch (the depth guard, an internal error) names no path.
    detail = "; ".join(f"{e.path}: {e.error}" if e.path else str(e.error) for e in errors[:20])
    more = f" (+{len(errors) - 20} more)" if len(errors) > 20 else ""
    return Outcome(False, f"changes rejected: {detail}{more}" if detail else "changes rejected")


def _json_object(body: bytes) -> dict[str, Any] | None:
    """The answer's JSON object; None for an empty or non-JSON body (or JSON that is not an
    object); TooDeep past the nesting bound, which is a failure, not "not JSON"."""
    if not body.strip():
        return None
    try:
        value = json_input.loads(body, what="answer")
    except json_input.TooDeep:
        raise
    except ValueError:  # UnicodeDecodeError among them
        return None
    return value if isinstance(value, dict) else None


# --- wording -----------------------------------------------------------------------------


def judged(cause: Event, attempt: Attempt, result: HttpResult, now: datetime) -> Record:
    """The record of an attempt whose answer is `result`."""
    outcome = classify(result)
    ATTEMPTS.labels("success" if outcome.succeeded else "failed").inc()
    if outcome.succeeded and outcome.changes is not None:
        return changes_received(cause, attempt, outcome.changes)
    retry_at = next_attempt_at(attempt.request.attempt, result.retry_after, now)
    return finished(cause, attempt, outcome, retry_at)


def changes_received(cause: Event, attempt: Attempt, changes: list[Any]) -> Record:
    """An answer with note changes: the attempt waits for the importer's verdict."""
    request = attempt.request
    event = DeliveryChangesReceived(
        **request.fields(),
        changes=changes,
        write_patterns=request.target.write_patterns,
        max_depth=request.target.max_depth,
        # Written one deeper than what the delivery answers (CONTRACT §4, §11): a cron
        # slot is depth 0, a change delivery the depth of its note batch.
        depth=(request.depth or 0) + 1,
    )
    return Record(cause, NewEvent.of(event), attempt, waits=True)


def finished(
    cause: Event,
    attempt: Attempt,
    outcome: Outcome,
    retry_at: datetime,
    *,
    final: bool = False,
    answers_wait: bool = False,
) -> Record:
    """The record of a finished attempt, after `cause` (the request, or the importer's
    verdict) on its stream. `final`: no retry, whatever attempts are left."""
    request = attempt.request
    number = request.attempt
    final = final or outcome.succeeded or outcome.gone or number > request.target.max_retries
    status: Status = "success" if outcome.succeeded else "failed"
    event: DeliveryOutcome
    if outcome.succeeded:
        event = _outcome(DeliverySucceeded, attempt, status, outcome.error)
    elif final:
        event = _outcome(DeliveryFailed, attempt, status, outcome.error)
    else:
        event = _outcome(
            DeliveryAttemptFailed,
            attempt,
            status,
            outcome.error,
            retry_at=iso(retry_at),
            next_attempt=number + 1,
        )
    if final:
        DELIVERIES.labels(status).inc()
    log.info(
        "delivery_attempted",
        attempt=number,
        status=status,
        final=final,
        response_status=attempt.response_status,
        duration_ms=attempt.duration_ms,
        error=outcome.error,
    )
    if not final:
        return Record(cause, NewEvent.of(event), attempt, answers_wait=answers_wait)
    return Record(
        cause,
        NewEvent.of(event),
        attempt,
        answers_wait=answers_wait,
        release=(request.webhook_id, request.delivery_id),
        group_release=handon.may_hold_group(request),
        health=Health(
            request.webhook_id, outcome.succeeded, outcome.gone, outcome.error, request.kind
        ),
    )


Ended = TypeVar("Ended", bound=DeliveryOutcome)


def _outcome(
    cls: type[Ended], attempt: Attempt, status: Status, error: str | None, **more: Any
) -> Ended:
    return cls(
        **attempt.request.fields(),
        status=status,
        response_status=attempt.response_status,
        duration_ms=attempt.duration_ms,
        error=error,
        started_at=iso(attempt.started_at),
        request_body=attempt.request_body,
        # only when cut, like context_truncated
        request_body_truncated=True if attempt.request_body_truncated else UNSET,
        response_body=attempt.response_body,
        **more,
    )


def failed_by_fault(
    cause: Event,
    attempt: Attempt,
    error: Exception,
    retry_at: datetime,
    *,
    final: bool = False,
    answers_wait: bool = False,
) -> Record:
    """A failed attempt saying `internal error: …` (retried as usual unless `final`); of
    what came back only the status is kept."""
    bare = Attempt(
        attempt.request,
        attempt.started_at,
        storable(attempt.request_body),
        attempt.response_status,
        None,
        attempt.duration_ms,
        attempt.request_body_truncated,
    )
    outcome = Outcome(False, internal_error(error))
    return finished(cause, bare, outcome, retry_at, final=final, answers_wait=answers_wait)
