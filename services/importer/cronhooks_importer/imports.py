"""Import the note changes an agent answered with (`delivery.changes_received`).

The batch is checked (rules.py) and applied (store.py) all or nothing, at the depth the
dispatcher states (1 for synchronous answers) under the webhook's write patterns. The
verdict goes on the delivery's stream: `notes.imported` with what was applied, or
`notes.rejected` with one error per offending change; the dispatcher then finishes the
attempt (and retries it with the importer's reasons as `previous_error`).

The notes and the verdict commit together or not at all: a delivery that ended meanwhile
(the scheduler's watchdog abandoned it, its stream moved on) gets no late writes. An
import that fails however often it is tried (a bug of ours) is rejected with `internal
error: …` by `end_by_fault`, so its attempt ends instead of waiting behind a dead letter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.consumer import PoisonHandler
from cronhooks_common.events import Causation, Event, EventType, NewEvent
from cronhooks_common.faults import internal_error, poison_ender
from cronhooks_importer.rules import FORBIDDEN, Change, ChangeError, allowed_by, parse_changes
from cronhooks_importer.store import Applied, Rejected, apply_changes

log = structlog.get_logger(__name__)

BATCHES = Counter("cronhooks_importer_batches_total", "Change batches", ["source", "outcome"])


async def import_changes(
    conn: asyncpg.Connection,
    raw: object,
    *,
    write_patterns: Sequence[str],
    depth: int,
    max_depth: int | None,
    writer: str,
    causation: Causation,
    now: datetime,
) -> tuple[list[Applied], list[ChangeError]]:
    """Check and apply a batch of writes as received (JSON) — an agent's answer or a push."""
    changes, errors = parse_changes(raw, may_write=allowed_by(write_patterns))
    return await apply_batch(
        conn,
        changes,
        errors,
        depth=depth,
        max_depth=max_depth,
        writer=writer,
        causation=causation,
        now=now,
    )


def too_deep(depth: int, max_depth: int | None) -> list[ChangeError]:
    """The depth guard: a write deeper than the webhook's maxDepth is refused."""
    if max_depth is not None and depth > max_depth:
        return [
            ChangeError("", f"depth {depth} exceeds the webhook's maxDepth {max_depth}", FORBIDDEN)
        ]
    return []


async def apply_batch(
    conn: asyncpg.Connection,
    changes: list[Change],
    errors: list[ChangeError],
    *,
    depth: int,
    max_depth: int | None,
    writer: str,
    causation: Causation,
    now: datetime,
    skip_webhooks: bool = False,
) -> tuple[list[Applied], list[ChangeError]]:
    """The one way notes are written: a parsed batch (writes and removals) applied all or
    nothing in a savepoint, at `depth`; (applied, []) or ([], errors)."""
    # (skip_webhooks: the batch was written with a skipWebhooks API key)
    errors = errors or too_deep(depth, max_depth)
    if errors:
        return [], errors
    if not changes:
        return [], []
    try:
        async with conn.transaction():
            applied = await apply_changes(
                conn,
                changes,
                depth=depth,
                writer=writer,
                causation=causation,
                now=now,
                skip_webhooks=skip_webhooks,
            )
    except Rejected as rejected:
        return [], rejected.errors
    return applied, []


def verdict(
    common: Mapping[str, object], applied: list[Applied], errors: list[ChangeError]
) -> NewEvent:
    """`notes.imported` with what was applied, or `notes.rejected` with why: the event that
    closes an import, from a synchronous answer or a token push alike."""
    if errors:
        errors_json = [e.to_json() for e in errors]
        return NewEvent(EventType.NOTES_REJECTED, {**common, "errors": errors_json})
    return NewEvent(EventType.NOTES_IMPORTED, {**common, "applied": [a.to_json() for a in applied]})


def make_handler(clock: Clock):  # type: ignore[no-untyped-def]
    async def on_changes_received(conn: asyncpg.Connection, event: Event) -> None:
        d = event.data
        causation = Causation.following(event, actor="importer")
        now = clock.now()
        try:
            async with conn.transaction():  # savepoint: the notes go only with the verdict
                applied, errors = await import_changes(
                    conn,
                    d.get("changes"),
                    write_patterns=d.get("write_patterns", []),
                    depth=int(d.get("depth", 1)),
                    max_depth=int(d.get("max_depth", 1)),
                    writer=f"delivery:{d['delivery_id']}",
                    causation=causation,
                    now=now,
                )
                await eventstore.append(
                    conn,
                    event.stream,
                    [verdict(_common(d), applied, errors)],
                    expected_version=event.version,
                    causation=causation,
                    occurred_at=now,
                )
        except eventstore.ConcurrencyError:
            log.warning("changes_after_delivery_ended", delivery_id=d["delivery_id"])
            return
        BATCHES.labels("delivery", "rejected" if errors else "imported").inc()
        log.info(
            "changes_imported" if not errors else "changes_rejected",
            delivery_id=d["delivery_id"],
            applied=len(applied),
            errors=len(errors),
        )

    return on_changes_received


def _common(d: Mapping[str, object]) -> dict[str, object]:
    """The fields of a verdict that say which attempt it answers."""
    return {
        "delivery_id": d["delivery_id"],
        "webhook_id": d["webhook_id"],
        "attempt": d["attempt"],
        "scheduled_for": d.get("scheduled_for"),
        "trigger": d.get("trigger"),
        "depth": int(str(d.get("depth", 1))),
    }


def rejected_by_fault(event: Event, error: Exception) -> NewEvent | None:
    """An import that keeps failing is rejected with `internal error: …`, so the dispatcher
    ends its attempt (the consumer's `on_poison`, through `poison_ender`)."""
    if event.type != EventType.DELIVERY_CHANGES_RECEIVED:
        return None
    return verdict(_common(event.data), [], [ChangeError("", internal_error(error))])


def make_fault_ender(pool: asyncpg.Pool, inbox: str, clock: Clock) -> PoisonHandler:
    return poison_ender(pool, inbox=inbox, actor="importer", clock=clock, ending=rejected_by_fault)
