"""Deliveries that end after, or without, their HTTP attempt.

* The importer's verdict on an attempt's note changes (`notes.imported`,
  `notes.rejected`, on the delivery's stream) finishes the attempt that waits for it
  (a row of dispatcher.attempts, waiting.py): success, or a failure that is
  retried as usual.
* A delivery another service ended (`delivery.failed` of the scheduler: a retry it
  cancelled or a pause held past its deadline, or its watchdog's `abandoned`) no longer
  holds its webhook's or its group's lane: they go to whoever waits (handon.py). Our own
  final failures released their lanes in the transaction that recorded them.
"""

from __future__ import annotations

import asyncpg

from cronhooks_common import agent_report
from cronhooks_common.consumer import claim_event
from cronhooks_common.events import (
    Causation,
    DeliveryFailed,
    Event,
    ImportFields,
    NotesImported,
    NotesRejected,
)
from cronhooks_common.faults import ABANDONED
from cronhooks_common.retry_deadline import DEADLINE_PASSED
from cronhooks_dispatcher import handon, outcome, queries, waiting
from cronhooks_dispatcher.attempt import Attempt
from cronhooks_dispatcher.deps import Call, Fault
from cronhooks_dispatcher.health import Health
from cronhooks_dispatcher.outcome import Outcome
from cronhooks_dispatcher.record import failed_by_fault, finished
from cronhooks_dispatcher.retry import next_attempt_at

# The ends another service records that count for the webhook's health (`release_ended`).
COUNTED = (ABANDONED, DEADLINE_PASSED)


async def finish_imported(call: Call, event: Event, verdict: NotesImported) -> None:
    await _finish(call, event, verdict, Outcome(True))


async def finish_rejected(call: Call, event: Event, verdict: NotesRejected) -> None:
    await _finish(call, event, verdict, outcome.rejected(verdict.errors))


async def _finish(call: Call, event: Event, verdict: ImportFields, result: Outcome) -> None:
    """The importer applied or rejected an attempt's changes: finish that attempt."""
    if call.handled:
        return
    row = await _waiting_attempt(call.deps.pool, verdict)
    if row is None or row["outcome"] != "importing":
        return  # a token push's verdict, or finished already (a redelivered verdict)
    attempt = Attempt(
        request=waiting.request_of(row["request"]),
        started_at=row["started_at"],
        request_body=row["request_body"],
        request_body_truncated=row["request_body_truncated"],
        response_status=row["response_status"],
        response_body=row["response_body"],
        duration_ms=row["duration_ms"],
        report=agent_report.from_data(row["report"]),
    )
    retry_at = next_attempt_at(attempt.request.attempt, None, call.deps.clock.now())
    record = finished(event, attempt, result, retry_at, answers_wait=True)
    await call.deps.writer.write(record)


async def fail_waiting_attempt(
    fault: Fault, event: Event, verdict: NotesImported | NotesRejected
) -> None:
    """A verdict that cannot be handled (poison) still ends the attempt waiting for it:
    failed for good, `internal error: …`."""
    row = await _waiting_attempt(fault.deps.pool, verdict)
    if row is None:
        return  # no attempt waits for this verdict
    now = fault.deps.clock.now()
    attempt = Attempt(waiting.request_of(row["request"]), now, "", None, None, 0)
    record = failed_by_fault(event, attempt, fault.error, now, final=True, answers_wait=True)
    await fault.deps.writer.write(record)


async def release_ended(call: Call, event: Event, failed: DeliveryFailed) -> None:
    """A delivery another service ended no longer blocks its webhook (FORBID, DELAY) or
    its execution group; whoever waits for them goes next. An abandoned delivery, and one
    whose retry a pause held past its deadline, count as a failure for the webhook's
    health, once (inbox); a retry cancelled with its webhook does not."""
    if event.actor == "dispatcher":
        return  # ours: released when it was recorded
    deps = call.deps
    raised = None
    async with deps.pool.acquire() as conn, conn.transaction():
        if not await claim_event(conn, queries.INBOX, event):
            return
        now = deps.clock.now()
        delivery_id = failed.delivery_id
        await handon.release(conn, [(failed.webhook_id, delivery_id)], [delivery_id], now)
        # An attempt that waited for the importer's verdict waits no more.
        await waiting.forget_delivery(conn, delivery_id)
        if failed.error in COUNTED:
            ended = Health(failed.webhook_id, False, False, failed.error, failed.kind)
            causation = Causation.following(event, actor="dispatcher")
            raised = await deps.writer.health.count_failure(conn, ended, causation, now)
    deps.writer.alerts.committed([raised] if raised else [])


async def _waiting_attempt(pool: asyncpg.Pool, verdict: ImportFields) -> asyncpg.Record | None:
    """The attempt an importer's verdict answers (a push through the token API answers
    none)."""
    if verdict.delivery_id is None or not isinstance(verdict.attempt, int):
        return None
    return await waiting.find(pool, verdict.delivery_id, verdict.attempt)
