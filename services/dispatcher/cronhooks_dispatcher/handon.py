"""Hand lanes on (CONTRACT §13): when a delivery that held a lane ends, the next waiter
gets it, in the transaction that records the end (record.py, finish.py).

The lanes are what admit.py lets one delivery hold until it has finished: its webhook's
`dispatcher.pending` row (DELAY's one waiter is a column of it) and its execution group's
`dispatcher.group_lanes` row (the group's waiters are `dispatcher.group_queue` rows, in
slot order). Freed webhook lanes go on first, then groups, the order in which deliveries
take them, so two transactions never wait for each other in a circle. A promotion is a
`delivery.released` on the waiter's stream: an event in the outbox, which the dispatcher
sends when it sees it, so it survives a kill -9 of any process at any instant (no sweeper).

A released delivery goes with its webhook's configuration at release time (as a retry
does); one whose webhook was deleted meanwhile, or disabled by the platform, is recorded
as skipped (reason `deleted` / `disabled`) and the lane goes to the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
import structlog
from msgspec.structs import asdict

from cronhooks_common import eventstore
from cronhooks_common.clock import iso
from cronhooks_common.events import (
    UNSET,
    Causation,
    DeliveryReleased,
    DeliveryRequested,
    DeliverySkipped,
    NewEvent,
    RequestFields,
    Target,
    WebhookConfig,
    WebhookConfigured,
    WebhookDeleted,
    WebhookDisabled,
    decode,
    delivery_stream,
    webhook_stream,
)
from cronhooks_common.events.delivery import DeliveryFieldsData, SkipReason
from cronhooks_common.webhooks import target_of
from cronhooks_dispatcher import queries

log = structlog.get_logger(__name__)


def may_hold_group(request: RequestFields) -> bool:
    """Could the delivery of this finished attempt hold a group lane? A first attempt was
    admitted with this very target, or released as the head of the group its release
    names; a retry carries the webhook's current target, whose group may have changed
    since, so a retry always looks."""
    return (
        request.attempt > 1
        or bool(request.target.execution_group)
        or (isinstance(request, DeliveryReleased) and bool(request.execution_group))
    )


def order_at(request: DeliveryRequested, requested_at: datetime) -> datetime:
    """A group waiter's place: its slot; a manual trigger (no slot) joins at the time it
    was requested."""
    slot = request.scheduled_for
    return datetime.fromisoformat(slot) if slot else requested_at


@dataclass(frozen=True, slots=True)
class Waiter:
    """A delivery whose webhook lane has just been freed for it."""

    webhook_id: int
    delivery_id: int
    since: datetime


async def release(
    conn: asyncpg.Connection,
    pending: list[tuple[int, int]],
    finished_in_groups: list[int],
    now: datetime,
) -> None:
    """Release what finished deliveries held — their webhooks' `pending` rows (FORBID and
    DELAY; `pending` = (webhook_id, delivery_id) pairs) and, for `finished_in_groups`,
    their group lanes — and hand both on. One statement when nobody waits."""
    waiters: list[Waiter] = []
    if pending:
        pending = sorted(pending)  # one lock order for every replica
        rows = await conn.fetch(
            queries.RELEASE_WEBHOOK_LANES, [w for w, _ in pending], [d for _, d in pending]
        )
        waiters = [
            Waiter(r["webhook_id"], r["waiting_delivery_id"], r["waiting_since"])
            for r in rows
            if r["waiting_delivery_id"] is not None
        ]
    promotion = _Promotion(conn, now, waiters=waiters)
    ids = sorted(set(finished_in_groups))
    if ids:
        freed = await conn.fetch(queries.RELEASE_GROUPS, ids)
        promotion.groups.update(r["group_name"] for r in freed)
    if promotion.waiters or promotion.groups:
        await promotion.run()


@dataclass
class _Queued:
    """A waiting delivery as its stream tells it: its request, and where to append."""

    request: DeliveryRequested
    version: int
    requested_at: datetime


@dataclass(frozen=True, slots=True)
class _Webhook:
    target: Target
    deleted: bool
    disabled: bool  # by the platform (410 Gone, too many failures), not paused by an admin

    @property
    def gone(self) -> bool:
        return self.deleted or self.disabled


@dataclass
class _Promotion:
    conn: asyncpg.Connection
    now: datetime
    appends: list[tuple[str, int, NewEvent, Causation]] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)
    waiters: list[Waiter] = field(default_factory=list)

    async def run(self) -> None:
        # Webhook lanes first, then groups, the order in which deliveries take them.
        while self.waiters or self.groups:
            if self.waiters:
                batch, self.waiters = self.waiters, []
                await self._webhook_waiters(batch)
            else:
                for group in sorted(self.groups):
                    self.groups.discard(group)
                    await self._next_in_group(group)
        appends = self.appends
        while appends:
            try:
                async with self.conn.transaction():  # savepoint: a conflict leaves nothing
                    await eventstore.append_many(self.conn, appends, occurred_at=self.now)
                return
            except eventstore.ConcurrencyError as exc:
                # Only a promotion or a skip follows `delivery.queued`, and each first
                # deletes the waiter's row: this cannot happen unless history was edited.
                log.error("queued_stream_moved", stream=exc.stream)
                appends = [a for a in appends if a[0] != exc.stream]

    async def _webhook_waiters(self, waiters: list[Waiter]) -> None:
        queued = await _load(self.conn, [w.delivery_id for w in waiters])
        states = await _webhooks(self.conn, {w.webhook_id for w in waiters})
        for waiter in sorted(waiters, key=lambda w: w.webhook_id):
            q = queued.get(waiter.delivery_id)
            if q is None:
                log.error("queued_delivery_missing", delivery_id=waiter.delivery_id)
                continue
            state = states.get(waiter.webhook_id)
            if state is None or state.gone:
                self._skip(q, state)
                continue
            await self.conn.execute(
                queries.TAKE_WEBHOOK_LANE, waiter.webhook_id, waiter.delivery_id
            )
            group = state.target.execution_group
            if not group:
                self._release(q, state.target, waiter.since)
                continue
            await self.conn.execute(queries.LOCK_GROUP, group)
            await self.conn.execute(
                queries.JOIN_GROUP,
                waiter.delivery_id,
                group,
                waiter.webhook_id,
                order_at(q.request, q.requested_at),
                waiter.since,
            )
            self.groups.add(group)

    async def _next_in_group(self, group: str) -> None:
        if await self.conn.fetchval(queries.GROUP_HOLDER, group) is not None:
            return
        while True:
            head = await self.conn.fetchrow(queries.NEXT_IN_GROUP, group)
            if head is None:
                return  # nobody waits: the group stays idle
            queued = (await _load(self.conn, [head["delivery_id"]])).get(head["delivery_id"])
            state = (await _webhooks(self.conn, {head["webhook_id"]})).get(head["webhook_id"])
            if queued is None:
                log.error("queued_delivery_missing", delivery_id=head["delivery_id"])
                continue
            if state is None or state.gone:
                self._skip(queued, state)
                await self._free_webhook_lane(head["webhook_id"], head["delivery_id"])
                continue
            await self.conn.execute(queries.HOLD_GROUP, group, head["delivery_id"])
            self._release(queued, state.target, head["queued_at"], group)
            return

    async def _free_webhook_lane(self, webhook_id: int, delivery_id: int) -> None:
        """A skipped group waiter may hold its webhook's lane (DELAY): pass that on too."""
        row = await self.conn.fetchrow(queries.FREE_WEBHOOK_LANE, webhook_id, delivery_id)
        if row is not None and row["waiting_delivery_id"] is not None:
            self.waiters.append(
                Waiter(webhook_id, row["waiting_delivery_id"], row["waiting_since"])
            )

    def _release(self, q: _Queued, target: Target, since: datetime, group: str = "") -> None:
        queued_ms = max(int((self.now - since).total_seconds() * 1000), 0)
        released = DeliveryReleased(
            # the request time its retry deadline counts from (§17): the request's, not now
            **{**asdict(q.request), "target": target, "requested_at": iso(q.requested_at)},
            queued_ms=queued_ms,
            # The group it holds from now on (the webhook's may have changed meanwhile):
            # its outcome must release this one.
            execution_group=group or UNSET,
        )
        self._append(q, NewEvent.of(released))
        log.info("delivery_released", delivery_id=released.delivery_id, queued_ms=queued_ms)

    def _skip(self, q: _Queued, state: _Webhook | None) -> None:
        reason: SkipReason = "deleted" if state is None or state.deleted else "disabled"
        fields: DeliveryFieldsData = {**q.request.fields(), "attempt": 0}
        skipped = DeliverySkipped(**fields, reason=reason, skipped_count=1)
        self._append(q, NewEvent.of(skipped))
        log.info("delivery_skipped", delivery_id=skipped.delivery_id, reason=reason)

    def _append(self, q: _Queued, event: NewEvent) -> None:
        stream = delivery_stream(q.request.delivery_id)
        self.appends.append((stream, q.version, event, Causation.new(actor="dispatcher")))


# --- reading what the promotion needs ------------------------------------------------------


async def _load(conn: asyncpg.Connection, delivery_ids: list[int]) -> dict[int, _Queued]:
    """The first request of each waiting delivery, and its stream's version."""
    rows = await conn.fetch(queries.FIRST_REQUESTS, [delivery_stream(d) for d in delivery_ids])
    queued: dict[int, _Queued] = {}
    for r in rows:
        request = decode(r["type"], r["data"], r["schema_version"])
        if isinstance(request, DeliveryRequested):
            queued[request.delivery_id] = _Queued(request, r["version"], r["occurred_at"])
    return queued


async def _webhooks(conn: asyncpg.Connection, webhook_ids: set[int]) -> dict[int, _Webhook]:
    """Each webhook as its stream tells it now (the dispatcher keeps no copy of webhooks:
    this is the rare path of a promotion)."""
    rows = await conn.fetch(
        queries.WEBHOOK_HISTORIES, [webhook_stream(w) for w in sorted(webhook_ids)]
    )
    config: dict[str, WebhookConfig] = {}
    deleted: set[str] = set()
    disabled: set[str] = set()
    for r in rows:
        stream = r["stream"]
        match decode(r["type"], r["data"], r["schema_version"]):
            case WebhookConfigured(config=now_config, changed=changed):
                config[stream] = now_config
                if "enabled" in changed and now_config.enabled:
                    disabled.discard(stream)  # re-enabled by an admin
            case WebhookDisabled():
                disabled.add(stream)
            case WebhookDeleted():
                deleted.add(stream)
    return {
        w: _Webhook(target_of(config[s]), s in deleted, s in disabled)
        for w in webhook_ids
        if (s := webhook_stream(w)) in config
    }
