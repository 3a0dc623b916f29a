"""Change webhooks (CONTRACT §11): every committed note batch requests one delivery per
change webhook it fires.

The matcher tails the event store in commit order (cronhooks_common.tail) and reads the
`webhook.*` events of change webhooks and the `note.changed` events together, as they
were committed: a batch is judged against the change webhooks as they stood when it
committed, and a replay judges it the same way. For each step, in one transaction: the
change webhooks it learnt about (`importer.change_webhooks`, its own copy), a row per
(webhook, batch) it fires (`importer.change_requests`, unique: a crash or a second
replica can never request a second delivery), the `delivery.requested` events, and the
checkpoint. One replica matches at a time (an advisory lock, as admin-api's projector).

A batch's `note.changed` events share one transaction, so they are read together; a step
that stops at its size limit in the middle of a transaction reads that transaction's rest
before matching.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import db, eventstore
from cronhooks_common.change_payload import ChangePayload
from cronhooks_common.clock import Clock
from cronhooks_common.events import CHANGE, Causation, Event, EventType, NewEvent, delivery_stream
from cronhooks_common.relay import NOTIFY_CHANNEL
from cronhooks_common.tail import (
    KEPT_EVENTS,
    Checkpoint,
    follow,
    held_back,
    read_rest_of,
    scan_after,
)
from cronhooks_common.webhooks import target_of
from cronhooks_importer.change_index import ChangeIndex, ChangeWebhook

log = structlog.get_logger(__name__)

MATCHER_LOCK = 0x63726F6E_6D617463  # "cronmatc"
WEBHOOK_TYPES = (
    EventType.WEBHOOK_CREATED,
    EventType.WEBHOOK_UPDATED,
    EventType.WEBHOOK_DISABLED,
    EventType.WEBHOOK_DELETED,
)
TYPES = [*WEBHOOK_TYPES, EventType.NOTE_CHANGED]

Append = tuple[str, int, NewEvent, Causation]  # as eventstore.append_many takes them

REQUESTED = Counter(
    "cronhooks_change_deliveries_requested_total", "Deliveries requested by change webhooks"
)
BATCHES = Counter("cronhooks_change_batches_matched_total", "Note batches matched")


def note_batches(events: list[Event]) -> Iterator[list[Event]]:
    """Consecutive `note.changed` events of one batch (they share `batch_id`)."""
    batch: list[Event] = []
    for event in events:
        if batch and event.data.get("batch_id") != batch[0].data.get("batch_id"):
            yield batch
            batch = []
        batch.append(event)
    if batch:
        yield batch


class ChangeMatcher:
    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        clock: Clock,
        *,
        batch_size: int = 1000,
        poll_seconds: float = 1.0,
    ) -> None:
        self._pool = pool
        self._dsn = dsn
        self._clock = clock
        self._batch_size = batch_size
        self._poll_seconds = poll_seconds
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # The index as of `_index_at`; None: load it from importer.change_webhooks.
        self._index: ChangeIndex | None = None
        self._index_at: Checkpoint | None = None

    async def start(self) -> None:
        listen = db.wake_on_notify(self._dsn, NOTIFY_CHANNEL, self._wake, name="change-matcher")
        self._tasks = [asyncio.create_task(listen), asyncio.create_task(self._run())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        await follow(
            self.step,
            self._wake,
            poll_seconds=self._poll_seconds,
            full=self._batch_size,
            unavailable="change_matcher_database_unavailable",
        )

    async def step(self) -> tuple[int, bool]:
        """Match one batch of committed events; (events scanned, whether committed events
        wait behind an older transaction still running)."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                if not await conn.fetchval("select pg_try_advisory_xact_lock($1)", MATCHER_LOCK):
                    return 0, False  # another replica matches
                row = await conn.fetchrow(
                    "select txid, position from importer.change_matcher_checkpoint"
                )
                after = Checkpoint(row["txid"], row["position"])
                index = await self._index_for(conn, after)
                # Webhooks and notes are streams kept forever: only their partition is read.
                events, last, scanned = await scan_after(
                    conn, after, self._batch_size, types=TYPES, table=KEPT_EVENTS
                )
                if scanned == self._batch_size:
                    rest, last = await read_rest_of(conn, last, types=TYPES, table=KEPT_EVENTS)
                    events += rest
                if events:
                    await self._apply(conn, index, events)
                if last != after:
                    await conn.execute(
                        "update importer.change_matcher_checkpoint set txid = $1, position = $2",
                        last.txid,
                        last.position,
                    )
                waiting = await held_back(conn, last, table=KEPT_EVENTS)
        except BaseException:
            self._index = None  # its changes may not have committed: load it again
            raise
        self._index_at = last
        return scanned, waiting

    async def _index_for(self, conn: asyncpg.Connection, at: Checkpoint) -> ChangeIndex:
        """The index as of checkpoint `at` (another replica may have moved it since)."""
        if self._index is None or self._index_at != at:
            index = ChangeIndex()
            for r in await conn.fetch("select webhook_id, config from importer.change_webhooks"):
                index.put(r["webhook_id"], r["config"])
            self._index = index
            log.info("change_webhooks_loaded", live=len(index))
        return self._index

    async def _apply(
        self, conn: asyncpg.Connection, index: ChangeIndex, events: list[Event]
    ) -> None:
        matched: list[_Match] = []
        notes: list[Event] = []
        for event in events:
            if event.type == EventType.NOTE_CHANGED:
                notes.append(event)
                continue
            # A webhook event ends the run of note events before it: those batches are
            # judged by the webhooks as they were until now.
            matched += _matches(index, notes)
            notes = []
            await self._webhook_event(conn, index, event)
        matched += _matches(index, notes)
        if matched:
            await self._request(conn, matched)

    async def _request(self, conn: asyncpg.Connection, matched: list[_Match]) -> None:
        """Claim every (webhook, batch) of the step in one statement and append a
        delivery for each claim won (one lost was requested before: a replay)."""
        now = self._clock.now()
        rows = await conn.fetch(
            """
            insert into importer.change_requests
                (webhook_id, batch_id, batch_at, delivery_id, requested_at)
            select w, b, t, nextval('eventstore.delivery_ids'), $3
            from unnest($1::bigint[], $2::uuid[], $4::timestamptz[]) as x(w, b, t)
            on conflict (webhook_id, batch_id, batch_at) do nothing
            returning webhook_id, batch_id::text as batch_id, delivery_id
            """,
            [m.hook.webhook_id for m in matched],
            [m.batch[0].data["batch_id"] for m in matched],
            now,
            # The batch's own time, the same on every replay: the table is partitioned by
            # day of it (retention), and the key stays unique per batch.
            [m.batch[0].occurred_at for m in matched],
        )
        won = {(r["webhook_id"], r["batch_id"]): r["delivery_id"] for r in rows}
        appends: list[Append] = []
        for m in matched:
            first = m.batch[0].data
            delivery_id = won.get((m.hook.webhook_id, str(first["batch_id"])))
            if delivery_id is None:
                continue  # requested before (a replay): never a second delivery
            data = {
                "delivery_id": delivery_id,
                "webhook_id": m.hook.webhook_id,
                "kind": CHANGE,
                "attempt": 1,
                "trigger": "change",
                "scheduled_for": None,
                "missed_count": 0,
                "depth": m.depth,
                "batch_id": first["batch_id"],
                **m.payload.request_fields(),  # changes (and content_truncated, §15)
                "target": target_of(m.hook.config),
            }
            causation = Causation.following(m.batch[0], actor="importer")
            appends.append(
                (
                    delivery_stream(delivery_id),
                    0,
                    NewEvent(EventType.DELIVERY_REQUESTED, data),
                    causation,
                )
            )
            log.info(
                "change_delivery_requested",
                webhook_id=m.hook.webhook_id,
                delivery_id=delivery_id,
                changes=len(m.payload.changes),
                depth=m.depth,
            )
        if appends:
            await eventstore.append_many(conn, appends, occurred_at=now)
            REQUESTED.inc(len(appends))

    async def _webhook_event(
        self, conn: asyncpg.Connection, index: ChangeIndex, event: Event
    ) -> None:
        data = event.data
        webhook_id = int(data["webhook_id"])
        if data.get("kind") != CHANGE:
            return  # a cron webhook (one id space: the kind tells them apart)
        if event.type in (EventType.WEBHOOK_CREATED, EventType.WEBHOOK_UPDATED):
            config: dict[str, Any] | None = dict(data["config"])
        elif event.type == EventType.WEBHOOK_DISABLED:
            stored = await conn.fetchval(
                "select config from importer.change_webhooks where webhook_id = $1", webhook_id
            )
            config = {**(stored or {}), "enabled": False} if stored is not None else None
        else:
            config = None  # deleted
        if config is None:
            await conn.execute(
                "delete from importer.change_webhooks where webhook_id = $1", webhook_id
            )
        else:
            await conn.execute(
                """
                insert into importer.change_webhooks (webhook_id, config) values ($1, $2)
                on conflict (webhook_id) do update set config = excluded.config
                """,
                webhook_id,
                config,
            )
        index.put(webhook_id, config)


@dataclass(frozen=True, slots=True)
class _Match:
    hook: ChangeWebhook
    batch: list[Event]
    depth: int
    payload: ChangePayload


def _matches(index: ChangeIndex, notes: list[Event]) -> list[_Match]:
    """The (webhook, batch) pairs these note events fire, judged by `index` as it is now."""
    out: list[_Match] = []
    for batch in note_batches(notes):
        BATCHES.inc()
        if any(e.data.get("skip_webhooks") for e in batch):
            continue  # written with a skipWebhooks API key
        depth = int(batch[0].data.get("depth", 0))
        for hook, payload in index.matches([e.data for e in batch], depth=depth):
            out.append(_Match(hook, batch, depth, payload))
    return out
