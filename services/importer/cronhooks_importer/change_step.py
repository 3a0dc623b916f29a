"""One step of the change matcher (change_matcher.py): the committed events it read, in
commit order, routed by `MATCHING` inside the step's transaction.

- `note.changed`: held until its run ends. Consecutive ones sharing a `batch_id` are one
  batch (one transaction wrote them).
- a change webhook's `webhook.created/updated/disabled/deleted`: first the run of note
  events before it is judged, by the webhooks as they stood until then; then the
  matcher's copy (`importer.change_webhooks`) and the index (change_index.py) take it.
- at the end, the (webhook, batch) pairs fired are claimed (`importer.change_requests`, at
  most once each) and every claim won requests a delivery (`delivery.requested`, kind
  `change`, on its own stream), or is skipped when its chain is full (chain_limit.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
import msgspec
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore, pause
from cronhooks_common.change_payload import ChangePayload
from cronhooks_common.clock import Clock
from cronhooks_common.events import (
    CHANGE,
    UNSET,
    Causation,
    ChangeSent,
    DeliveryRequested,
    DeliverySkipped,
    Event,
    NewEvent,
    NoteChanged,
    WebhookConfig,
    WebhookConfigured,
    WebhookCreated,
    WebhookDeleted,
    WebhookDisabled,
    WebhookRef,
    WebhookUpdated,
    delivery_stream,
)
from cronhooks_common.handlers import Handlers
from cronhooks_importer import queries
from cronhooks_importer.chain_alerts import raise_chain_alert
from cronhooks_importer.chain_limit import DEFAULT, ChainPolicy, added, places
from cronhooks_importer.chain_limit import skipped as chain_skipped
from cronhooks_importer.change_index import ChangeIndex, ChangeWebhook

log = structlog.get_logger(__name__)

Append = tuple[str, int, NewEvent, Causation]  # as eventstore.append_many takes them

REQUESTED = Counter(
    "cronhooks_change_deliveries_requested_total", "Deliveries requested by change webhooks"
)
BATCHES = Counter("cronhooks_change_batches_matched_total", "Note batches matched")
SKIPPED = Counter(
    "cronhooks_change_deliveries_chain_skipped_total",
    "Change deliveries skipped: their chain reached CRONHOOKS_MAX_CHAIN_DELIVERIES",
)


@dataclass(frozen=True, slots=True)
class Note:
    """A committed `note.changed`: its envelope (time, causation) and its typed data."""

    event: Event
    change: NoteChanged


@dataclass(frozen=True, slots=True)
class Match:
    """A batch that fires a webhook: one delivery, unless it was requested before."""

    hook: ChangeWebhook
    batch: list[Note]
    depth: int
    payload: ChangePayload

    @property
    def batch_id(self) -> str:
        return self.batch[0].change.batch_id

    @property
    def batch_at(self) -> datetime:
        # The batch's own time, the same on every replay: importer.change_requests is
        # partitioned by day of it (retention), and the key stays unique per batch.
        return self.batch[0].event.occurred_at


@dataclass(slots=True)
class Step:
    """What handling the events of one step works in and gathers."""

    conn: asyncpg.Connection
    index: ChangeIndex
    notes: list[Note] = field(default_factory=list)  # the run of note events not judged yet
    fired: list[Match] = field(default_factory=list)

    def judge_notes(self) -> None:
        """The (webhook, batch) pairs the held run fires, judged by the index as it is now:
        at the end of the step, and before any webhook event changes what the index says."""
        self.fired += matches(self.index, self.notes)
        self.notes = []


def is_change(webhook: WebhookRef) -> bool:
    """One id space for both kinds of webhook: the kind tells them apart."""
    return webhook.kind == CHANGE


def note_batches(notes: list[Note]) -> Iterator[list[Note]]:
    """Consecutive `note.changed` events of one batch (they share `batch_id`)."""
    batch: list[Note] = []
    for note in notes:
        if batch and note.change.batch_id != batch[0].change.batch_id:
            yield batch
            batch = []
        batch.append(note)
    if batch:
        yield batch


def matches(index: ChangeIndex, notes: list[Note]) -> list[Match]:
    """The (webhook, batch) pairs these note events fire, judged by `index` as it is now."""
    out: list[Match] = []
    for batch in note_batches(notes):
        BATCHES.inc()
        if any(note.change.skip_webhooks for note in batch):
            continue  # written with a skipWebhooks API key
        depth = batch[0].change.depth
        for hook, payload in index.matches([note.change for note in batch], depth=depth):
            out.append(Match(hook, batch, depth, payload))
    return out


# --- the handlers --------------------------------------------------------------------------


async def hold_note(step: Step, event: Event, change: NoteChanged) -> None:
    step.notes.append(Note(event, change))


async def keep_change_webhook(step: Step, event: Event, webhook: WebhookConfigured) -> None:
    step.judge_notes()
    if is_change(webhook):
        await _keep(step, webhook.webhook_id, webhook.config)


async def pause_change_webhook(step: Step, event: Event, webhook: WebhookDisabled) -> None:
    step.judge_notes()
    if not is_change(webhook):
        return
    kept = await queries.change_webhook_config(step.conn, webhook.webhook_id)
    if kept is None:
        step.index.put(webhook.webhook_id, None)  # none kept: nothing to pause
        return
    config = msgspec.convert(kept, WebhookConfig)
    await _keep(step, webhook.webhook_id, msgspec.structs.replace(config, enabled=False))


async def forget_change_webhook(step: Step, event: Event, webhook: WebhookDeleted) -> None:
    step.judge_notes()
    if is_change(webhook):
        await queries.forget_change_webhook(step.conn, webhook.webhook_id)
        step.index.put(webhook.webhook_id, None)


async def _keep(step: Step, webhook_id: int, config: WebhookConfig) -> None:
    await queries.keep_change_webhook(step.conn, webhook_id, msgspec.to_builtins(config))
    step.index.put(webhook_id, config)


MATCHING = Handlers[Step](
    {
        WebhookCreated: keep_change_webhook,
        WebhookUpdated: keep_change_webhook,
        WebhookDisabled: pause_change_webhook,
        WebhookDeleted: forget_change_webhook,
        NoteChanged: hold_note,
    }
)


async def match_events(
    conn: asyncpg.Connection,
    index: ChangeIndex,
    events: list[Event],
    clock: Clock,
    chains: ChainPolicy = DEFAULT,
) -> None:
    """Handle one step's events in commit order, then request what their batches fire."""
    step = Step(conn, index)
    for event in events:
        await MATCHING.handle(step, event)
    step.judge_notes()
    if step.fired:
        await request_deliveries(conn, step.fired, clock.now(), chains)


async def request_deliveries(
    conn: asyncpg.Connection,
    fired: list[Match],
    now: datetime,
    chains: ChainPolicy = DEFAULT,
) -> None:
    """Claim every (webhook, batch) of the step in one statement and append a delivery
    for each claim won (one lost was requested before: a replay). Each is counted in its
    chain in this transaction; one past CRONHOOKS_MAX_CHAIN_DELIVERIES is skipped, and
    every one while deliveries are paused (CONTRACT §16.4)."""
    # The pause switch first, share-locked to the commit: a pauseDeliveries waits for
    # this step, and a step after it sees it (cronhooks_common.pause).
    held = (await pause.deciding(conn)).active(now)
    won = await queries.claim_change_requests(
        conn, [(m.hook.webhook_id, m.batch_id, m.batch_at) for m in fired], now=now
    )
    claimed = [
        (m, won[(m.hook.webhook_id, m.batch_id)])
        for m in fired
        if (m.hook.webhook_id, m.batch_id) in won  # else requested before: never twice
    ]
    traces = [t if isinstance(t := m.batch[0].change.trace, str) else None for m, _ in claimed]
    counts = (
        await queries.count_chain_deliveries(conn, added(traces), now=now) if any(traces) else {}
    )
    appends: list[Append] = []
    for (m, delivery_id), place in zip(claimed, places(traces, counts, chains.limit), strict=True):
        causation = Causation.following(m.batch[0].event, actor="importer")
        request = requested(m, delivery_id)
        event = NewEvent.of(request)
        if place is not None and not place.allowed:
            event = NewEvent.of(chain_skipped(request, chains.limit))
            SKIPPED.inc()
            if place.raises_alert and isinstance(request.trace, str):
                await raise_chain_alert(conn, chains, m.hook, request.trace, causation, now)
        elif held:  # paused (CONTRACT §16.4): skipped, never sent later
            event = NewEvent.of(paused_skip(request))
        else:
            REQUESTED.inc()
        appends.append((delivery_stream(delivery_id), 0, event, causation))
        log.info(
            "change_delivery_" + ("requested" if event.type == request.TYPE else "skipped"),
            webhook_id=m.hook.webhook_id,
            delivery_id=delivery_id,
            changes=len(m.payload.changes),
            depth=m.depth,
            place=None if place is None else place.number,
        )
    if appends:
        await eventstore.append_many(conn, appends, occurred_at=now)


def paused_skip(request: DeliveryRequested) -> DeliverySkipped:
    """What stands on a change delivery's stream instead of its request while paused."""
    return DeliverySkipped(
        **request.fields(),
        reason="paused",
        skipped_count=1,
        trace=request.trace,
        parent=request.parent,
    )


def requested(m: Match, delivery_id: int) -> DeliveryRequested:
    """A change delivery (CONTRACT §11): the batch's changes the webhook passes, as
    change_payload shows them (`content_truncated` only when the 1 MiB cap cut, §15)."""
    return DeliveryRequested(
        delivery_id=delivery_id,
        webhook_id=m.hook.webhook_id,
        kind="change",
        attempt=1,
        trigger="change",
        scheduled_for=None,
        missed_count=0,
        depth=m.depth,
        batch_id=m.batch_id,
        changes=[ChangeSent(**change) for change in m.payload.changes],
        content_truncated=True if m.payload.content_truncated else UNSET,
        target=m.hook.target,
        # a batch a delivery wrote continues its chain, with it as parent; an admin's or an
        # API key's write starts none (the delivery is a root: both absent) (§16.3)
        trace=m.batch[0].change.trace,
        parent=m.batch[0].change.written_by if m.batch[0].change.trace else UNSET,
    )
