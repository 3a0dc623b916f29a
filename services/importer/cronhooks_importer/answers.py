"""Step 1: import the note changes an agent answered with (`delivery.changes_received`).

The importer's consumer routes its events by `HANDLERS`. The answer's batch goes through
the one write path (imports.py) at the depth the dispatcher states (1 for synchronous
answers) under the webhook's write patterns; the verdict goes on the delivery's stream,
and the dispatcher then finishes the attempt (and retries it with the importer's reasons
as `previous_error`).

The notes and the verdict commit together or not at all: a delivery that ended meanwhile
(the scheduler's watchdog abandoned it, its stream moved on) gets no late writes. An
import that fails however often it is tried (a bug of ours) is rejected with `internal
error: …` by the consumer's poison hook (`fault_ender`, routed by `ENDINGS`), so its
attempt ends instead of waiting behind a dead letter.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.consumer import PoisonHandler
from cronhooks_common.events import (
    Causation,
    DeliveryChangesReceived,
    Event,
    ImportFields,
    NewEvent,
    NotesImported,
    NotesRejected,
    UnsetType,
)
from cronhooks_common.faults import Endings, internal_error, poison_ender
from cronhooks_common.handlers import Handlers
from cronhooks_common.traces import Origin
from cronhooks_importer.imports import BATCHES, import_changes, verdict
from cronhooks_importer.rules import ChangeError

log = structlog.get_logger(__name__)

INBOX = "importer.inbox"
ACTOR = "importer"


@dataclass(frozen=True, slots=True)
class Importing:
    """What the importer's handlers work in: the consumer's transaction, and the clock."""

    conn: asyncpg.Connection
    clock: Clock


def attempt_of(answer: DeliveryChangesReceived) -> ImportFields:
    """Which attempt a synchronous answer's verdict closes."""
    return ImportFields(
        delivery_id=answer.delivery_id,
        webhook_id=answer.webhook_id,
        attempt=answer.attempt,
        scheduled_for=answer.scheduled_for,
        trigger=answer.trigger,
        depth=answer.depth,
    )


async def import_answer(ctx: Importing, event: Event, answer: DeliveryChangesReceived) -> None:
    causation = Causation.following(event, actor=ACTOR)
    now = ctx.clock.now()
    conn = ctx.conn
    try:
        async with conn.transaction():  # savepoint: the notes go only with the verdict
            applied, errors = await import_changes(
                conn,
                answer.changes,  # as answered: the rules judge every part of them
                write_patterns=answer.write_patterns,
                depth=answer.depth,
                max_depth=answer.max_depth,
                writer=f"delivery:{answer.delivery_id}",
                origin=Origin.delivery(answer.kind, answer.delivery_id, _or_none(answer.trace)),
                causation=causation,
                now=now,
            )
            await eventstore.append(
                conn,
                event.stream,
                [NewEvent.of(verdict(attempt_of(answer), applied, errors))],
                expected_version=event.version,
                causation=causation,
                occurred_at=now,
            )
    except eventstore.ConcurrencyError:
        log.warning("changes_after_delivery_ended", delivery_id=answer.delivery_id)
        return
    BATCHES.labels("delivery", "rejected" if errors else "imported").inc()
    log.info(
        "changes_imported" if not errors else "changes_rejected",
        delivery_id=answer.delivery_id,
        applied=len(applied),
        errors=len(errors),
    )


def _or_none(trace: str | UnsetType) -> str | None:
    return trace if isinstance(trace, str) else None


HANDLERS = Handlers[Importing]({DeliveryChangesReceived: import_answer})


def reject_by_fault(
    answer: DeliveryChangesReceived, error: Exception
) -> NotesImported | NotesRejected:
    """An import that keeps failing is rejected with `internal error: …`, so the dispatcher
    ends its attempt."""
    return verdict(attempt_of(answer), [], [ChangeError("", internal_error(error))])


ENDINGS = Endings({DeliveryChangesReceived: reject_by_fault})


def fault_ender(pool: asyncpg.Pool, clock: Clock) -> PoisonHandler:
    """The consumer's `on_poison`: the rejection after the event, once (cronhooks_common.faults)."""
    return poison_ender(pool, inbox=INBOX, actor=ACTOR, clock=clock, ending=ENDINGS)
