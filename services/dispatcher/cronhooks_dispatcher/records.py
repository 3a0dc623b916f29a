"""What an attempt is recorded as: the `Record` the RecordWriter writes (recording.py) —
the event that follows the attempt's cause on the delivery's stream, the attempt log row,
what the delivery releases and counts when it has finished. Pure: delivery.py decides,
this module only words the outcome (CONTRACT §4, §6).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from prometheus_client import Counter

from cronhooks_common.clock import iso
from cronhooks_common.events import CRON, Event, EventType, NewEvent, delivery_fields, storable
from cronhooks_common.faults import internal_error
from cronhooks_dispatcher import lanes
from cronhooks_dispatcher.outcome import Outcome
from cronhooks_dispatcher.recording import Attempt as AttemptRow
from cronhooks_dispatcher.recording import Health, Record

log = structlog.get_logger(__name__)

DELIVERIES = Counter("cronhooks_dispatcher_deliveries_total", "Finished deliveries", ["outcome"])


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one HTTP attempt sent and got: the attempt log row and the outcome event data."""

    request: dict[str, Any]  # the delivery.requested data
    started_at: datetime
    request_body: str  # as sent, api_token redacted, cut at 64 KiB
    response_status: int | None
    response_body: str | None
    duration_ms: int
    request_body_truncated: bool = False

    @property
    def delivery_id(self) -> int:
        return int(self.request["delivery_id"])

    @property
    def number(self) -> int:
        return int(self.request["attempt"])


def skipped(event: Event) -> Record:
    """FORBID: a slot whose webhook's earlier delivery is still pending is skipped."""
    data = {
        **delivery_fields(event.data),
        "attempt": 0,
        "status": "skipped",
        "reason": "concurrency",
        "skipped_count": 1,
        "policy": "FORBID",
    }
    log.info("delivery_skipped", reason="concurrency")
    return Record(cause=event, event=NewEvent(EventType.DELIVERY_SKIPPED, data))


def changes_received(event: Event, attempt: Attempt, changes: list[Any]) -> Record:
    """An answer with note changes: the attempt waits for the importer's verdict."""
    request = attempt.request
    data = {
        **delivery_fields(request),
        "changes": changes,
        "write_patterns": request["target"]["write_patterns"],
        "max_depth": request["target"].get("max_depth", 1),
        # Written one deeper than what the delivery answers (CONTRACT §4, §11): a cron
        # slot is depth 0, a change delivery the depth of its note batch.
        "depth": int(request.get("depth", 0)) + 1,
    }
    return Record(
        cause=event,
        event=NewEvent(EventType.DELIVERY_CHANGES_RECEIVED, data),
        attempt=_row(attempt, "importing", None),
    )


def finished(
    cause: Event,
    attempt: Attempt,
    outcome: Outcome,
    retry_at: datetime,
    *,
    final: bool = False,
) -> Record:
    """The record of a finished attempt and the event it leads to, after `cause` (the
    request, or the importer's verdict) on the same stream. `final`: no retry, whatever
    attempts are left."""
    request = attempt.request
    max_retries = int(request["target"].get("max_retries", 0))
    final = final or outcome.succeeded or outcome.gone or attempt.number > max_retries
    status = "success" if outcome.succeeded else "failed"
    data: dict[str, Any] = {
        **delivery_fields(request),
        "status": status,
        "response_status": attempt.response_status,
        "duration_ms": attempt.duration_ms,
        "error": outcome.error,
        "started_at": iso(attempt.started_at),
        "request_body": attempt.request_body,
        "response_body": attempt.response_body,
    }
    if attempt.request_body_truncated:  # only when cut, like context_truncated
        data["request_body_truncated"] = True
    if outcome.succeeded:
        kind = EventType.DELIVERY_SUCCEEDED
    elif final:
        kind = EventType.DELIVERY_FAILED
    else:
        kind = EventType.DELIVERY_ATTEMPT_FAILED
        data["retry_at"] = iso(retry_at)
        data["next_attempt"] = attempt.number + 1
    if final:
        DELIVERIES.labels(status).inc()
    log.info(
        "delivery_attempted",
        attempt=attempt.number,
        status=status,
        final=final,
        response_status=attempt.response_status,
        duration_ms=attempt.duration_ms,
        error=outcome.error,
    )
    webhook_id = int(request["webhook_id"])
    return Record(
        cause=cause,
        event=NewEvent(kind, data),
        attempt=_row(attempt, status, outcome.error),
        release=(webhook_id, attempt.delivery_id) if final else None,
        group_release=final and lanes.may_hold_group(request),
        health=Health(
            webhook_id,
            outcome.succeeded,
            outcome.gone,
            outcome.error,
            request.get("kind", CRON),
        )
        if final
        else None,
    )


def failed_by_fault(
    cause: Event, attempt: Attempt, error: Exception, retry_at: datetime, *, final: bool = False
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
    return finished(cause, bare, Outcome(False, internal_error(error)), retry_at, final=final)


def _row(attempt: Attempt, outcome: str, error: str | None) -> AttemptRow:
    return AttemptRow(
        delivery_id=attempt.delivery_id,
        attempt=attempt.number,
        webhook_id=int(attempt.request["webhook_id"]),
        started_at=attempt.started_at,
        duration_ms=attempt.duration_ms,
        request_body=attempt.request_body,
        request_body_truncated=attempt.request_body_truncated,
        response_status=attempt.response_status,
        response_body=attempt.response_body,
        error=error,
        outcome=outcome,
        request=attempt.request,
    )
