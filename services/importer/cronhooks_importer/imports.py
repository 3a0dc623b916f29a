"""Import the note changes an agent answered with (`delivery.changes_received`).

The batch is checked (rules.py) and applied (store.py) all or nothing, at the depth the
dispatcher states (1 for synchronous answers) under the webhook's write patterns. The
verdict goes on the delivery's stream: `notes.imported` with what was applied, or
`notes.rejected` with one error per offending change; the dispatcher then finishes the
attempt (and retries it with the importer's reasons as `previous_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.events import Causation, Event, EventType, NewEvent
from cronhooks_importer.rules import ChangeError, parse_changes
from cronhooks_importer.store import Rejected, apply_changes

log = structlog.get_logger(__name__)

BATCHES = Counter("cronhooks_importer_batches_total", "Change batches", ["source", "outcome"])


async def import_changes(
    conn: asyncpg.Connection,
    raw: object,
    *,
    write_patterns: list[str],
    depth: int,
    max_depth: int,
    writer: str,
    causation: Causation,
    now: datetime,
) -> tuple[list[dict[str, object]], list[ChangeError]]:
    """Check and apply a batch in a savepoint; (applied, []) or ([], errors)."""
    changes, errors = parse_changes(raw, write_patterns=write_patterns)
    if not errors and depth > max_depth:
        errors = [ChangeError("", f"depth {depth} exceeds the webhook's maxDepth {max_depth}")]
    if errors:
        return [], errors
    try:
        async with conn.transaction():
            applied = await apply_changes(
                conn, changes, depth=depth, writer=writer, causation=causation, now=now
            )
    except Rejected as rejected:
        return [], rejected.errors
    return [a.to_json() for a in applied], []


def verdict(
    common: Mapping[str, object], applied: list[dict[str, object]], errors: list[ChangeError]
) -> NewEvent:
    """`notes.imported` with what was applied, or `notes.rejected` with why: the event that
    closes an import, from a synchronous answer or a token push alike."""
    if errors:
        errors_json = [e.to_json() for e in errors]
        return NewEvent(EventType.NOTES_REJECTED, {**common, "errors": errors_json})
    return NewEvent(EventType.NOTES_IMPORTED, {**common, "applied": applied})


def make_handler(clock: Clock):  # type: ignore[no-untyped-def]
    async def on_changes_received(conn: asyncpg.Connection, event: Event) -> None:
        d = event.data
        causation = Causation.following(event, actor="importer")
        now = clock.now()
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
        common = {
            "delivery_id": d["delivery_id"],
            "webhook_id": d["webhook_id"],
            "attempt": d["attempt"],
            "scheduled_for": d.get("scheduled_for"),
            "trigger": d.get("trigger"),
            "depth": int(d.get("depth", 1)),
        }
        await eventstore.append(
            conn,
            event.stream,
            [verdict(common, applied, errors)],
            expected_version=event.version,
            causation=causation,
            occurred_at=now,
        )
        BATCHES.labels("delivery", "rejected" if errors else "imported").inc()
        log.info(
            "changes_imported" if not errors else "changes_rejected",
            delivery_id=d["delivery_id"],
            applied=len(applied),
            errors=len(errors),
        )

    return on_changes_received
