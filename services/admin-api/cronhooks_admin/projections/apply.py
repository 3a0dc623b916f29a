"""Which event makes which read model, and `apply_batch`, the one way events are projected.

Projection is deterministic in the events alone (their data and `occurred_at`, never
"now"), so replaying history rebuilds identical tables. It runs inline, in the
transaction of an admin command (a query right after a mutation sees it), in the live
projector (projector.py), which tails the event store in commit order, and in a rebuild
(rebuild.py). Every handler is idempotent — the projector applies again what a command
applied inline — and tolerates events of different streams in any order (a delivery
outcome before its request): they upsert instead of assuming a row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import asyncpg

from cronhooks_admin.projections import agent_jobs, alerts, deliveries, notes, webhooks
from cronhooks_common.events import (
    AlertRaised,
    AlertResolved,
    DeliveryAttemptFailed,
    DeliveryFailed,
    DeliveryQueued,
    DeliveryReleased,
    DeliveryRequested,
    DeliverySkipped,
    DeliverySucceeded,
    Event,
    NoteChanged,
    Payload,
    TriggerFired,
    WebhookCreated,
    WebhookDeleted,
    WebhookDisabled,
    WebhookSecretRotated,
    WebhookUpdated,
)
from cronhooks_common.handlers import Handlers
from cronhooks_common.relay import publish_rounds

# Rare events, applied one by one (in their round, before the batched kinds).
HANDLERS = Handlers[asyncpg.Connection](
    {
        WebhookCreated: webhooks.on_webhook_created,
        WebhookUpdated: webhooks.on_webhook_updated,
        WebhookDeleted: webhooks.on_webhook_deleted,
        WebhookDisabled: webhooks.on_webhook_disabled,
        WebhookSecretRotated: webhooks.on_webhook_secret_rotated,
        TriggerFired: agent_jobs.on_trigger_fired,
        AlertRaised: alerts.on_alert_raised,
        AlertResolved: alerts.on_alert_resolved,
    }
)

# batch(conn, [(event, its typed data), ...]): the events of one round that it takes.
Batch = Callable[[asyncpg.Connection, list[tuple[Event, Any]]], Awaitable[None]]


class Batches:
    """The hot kinds: one statement per kind and round. Like `Handlers`, a table from
    event class to what projects it; several classes may share one batch."""

    def __init__(self, table: Mapping[type[Payload], Batch]) -> None:
        self._by_type = {cls.TYPE: batch for cls, batch in table.items()}

    def __contains__(self, event_type: object) -> bool:
        return event_type in self._by_type

    async def apply(self, conn: asyncpg.Connection, round_: Sequence[Event]) -> None:
        """Decode the round's events of these kinds and run each batch once, on its events
        in store order."""
        grouped: dict[Batch, list[tuple[Event, Any]]] = defaultdict(list)
        for event in round_:
            batch = self._by_type.get(event.type)
            if batch is not None:
                grouped[batch].append((event, event.payload))
        for batch, items in grouped.items():
            await batch(conn, items)


BATCHES = Batches(
    {
        DeliveryRequested: deliveries.requested,
        DeliverySucceeded: deliveries.finished,
        DeliveryFailed: deliveries.finished,
        DeliveryAttemptFailed: deliveries.finished,
        DeliverySkipped: deliveries.skipped,
        DeliveryQueued: deliveries.queued,
        DeliveryReleased: deliveries.released,
        NoteChanged: notes.changed,
    }
)


def projected(event: Event) -> bool:
    return event.type in HANDLERS or event.type in BATCHES


async def apply_batch(conn: asyncpg.Connection, events: Sequence[Event]) -> None:
    """Project `events` (in store order) set-based, with the same result as one by one.

    Rounds hold at most one event per stream, in version order, so no statement touches
    one row twice; within a round the webhook events go first (a webhook is created before
    its first delivery is projected), then one statement per batched kind."""
    for round_ in publish_rounds([e for e in events if projected(e)]):
        for event in round_:
            if event.type in HANDLERS:
                await HANDLERS.handle(conn, event)
        await BATCHES.apply(conn, round_)
