"""Lanes: concurrencyPolicy DELAY and execution groups (CONTRACT §13), decided by Postgres.

A *lane* is something only one delivery may hold at a time, from its first attempt until
it has finished (success or final failure, retries included):

* the webhook lane, `dispatcher.pending` (the row FORBID claims too), for DELAY webhooks.
  A slot that finds it taken waits on that row (`waiting_delivery_id`: at most one per
  webhook, by construction); a later slot is skipped (`delivery.skipped`, reason
  `still_running`). A manual trigger is not delayed, as under FORBID: it runs at once and,
  when it finds the lane free, holds it, so slots wait behind it;
* the group lane, `dispatcher.group_lanes`, for a non-empty `execution_group`: a delivery
  that finds its group busy joins `dispatcher.group_queue`, ordered by slot (a manual
  trigger by the time it was requested), then delivery id.

A delivery takes its webhook lane first, then its group lane; the order is the same
everywhere, so two transactions never wait for each other in a circle. Every decision
locks the lane's row, in the transaction that records what it decided: a delivery that
finds a lane busy and the finishing holder that looks for a successor cannot miss each
other. Waiting is recorded as `delivery.queued`; when the holder's outcome is recorded,
the same transaction hands the lane to the next waiter and appends `delivery.released`
on the waiter's stream. The dispatcher sends a delivery when it sees that event, so a
promotion survives a kill -9 of any process at any instant: it is an event in the
outbox, and the broker redelivers it until a dispatcher has recorded the attempt. No
sweeper is needed.

A released delivery goes with its webhook's configuration at release time (as a retry
does); one whose webhook was deleted meanwhile, or disabled by the platform, is recorded
as skipped (reason `deleted` / `disabled`) and the lane goes to the next one.

The hot path pays nothing: a request without DELAY or a group never reaches `admit`, and
a finished delivery only looks at the group lanes when it could hold one (`may_hold_group`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.consumer import claim_events
from cronhooks_common.events import (
    CRON,
    Causation,
    Event,
    EventType,
    NewEvent,
    delivery_fields,
    delivery_stream,
    webhook_stream,
)
from cronhooks_common.webhooks import target_of

log = structlog.get_logger(__name__)

INBOX = "dispatcher.inbox"
DELAY = "DELAY"


def group_of(target: dict[str, Any]) -> str:
    return str(target.get("execution_group") or "")


def admits(request: dict[str, Any]) -> bool:
    """Does this request go through a lane? A cron delivery's first attempt with DELAY or
    an execution group; later attempts keep the lanes their first attempt took."""
    if request["attempt"] != 1 or request.get("kind", CRON) != CRON:
        return False
    target = request["target"]
    return target.get("concurrency_policy") == DELAY or bool(group_of(target))


def may_hold_group(request: dict[str, Any]) -> bool:
    """Could the delivery of this finished attempt hold a group lane? A first attempt was
    admitted with this very target, or released as the head of the group its release
    names; a retry carries the webhook's current target, whose group may have changed
    since, so a retry always looks."""
    return (
        request["attempt"] > 1
        or bool(group_of(request["target"]))
        or bool(request.get("execution_group"))
    )


class _Handled(Exception):
    """The request was handled meanwhile (a redelivered message): change nothing."""


async def _follow(conn: asyncpg.Connection, cause: Event, event: NewEvent, now: datetime) -> None:
    """Record `event` after the request `cause`, claiming the request in the inbox."""
    if not await claim_events(conn, INBOX, [cause]):
        raise _Handled
    try:
        async with conn.transaction():
            await eventstore.append_many(
                conn,
                [(cause.stream, cause.version, event, Causation.following(cause, "dispatcher"))],
                occurred_at=now,
            )
    except eventstore.ConcurrencyError:
        raise _Handled from None


# --- a first attempt arrives -------------------------------------------------------------

_CLAIM_WEBHOOK = """
insert into dispatcher.pending (webhook_id, delivery_id) values ($1, $2)
on conflict (webhook_id) do update set delivery_id = dispatcher.pending.delivery_id
returning delivery_id, waiting_delivery_id
"""

# The upsert locks the group's row until the decision commits.
_LOCK_GROUP = """
insert into dispatcher.group_lanes (group_name) values ($1)
on conflict (group_name) do update set group_name = excluded.group_name
returning running_delivery_id
"""


async def admit(pool: asyncpg.Pool, event: Event, now: datetime) -> bool:
    """May this first attempt (`admits` is true) be sent now? If not, it was recorded as
    waiting (`delivery.queued`) or as skipped, in the transaction that found its lane busy."""
    request = event.data
    delivery_id = int(request["delivery_id"])
    webhook_id = int(request["webhook_id"])
    target = request["target"]
    group = group_of(target)
    try:
        async with pool.acquire() as conn, conn.transaction():
            if target.get("concurrency_policy") == DELAY:
                row = await conn.fetchrow(_CLAIM_WEBHOOK, webhook_id, delivery_id)
                if row["delivery_id"] != delivery_id and request["trigger"] == "schedule":
                    await _wait_for_webhook(conn, event, row["waiting_delivery_id"], now)
                    return False
            if group:
                running = await conn.fetchval(_LOCK_GROUP, group)
                if running is not None and running != delivery_id:
                    await _wait_for_group(conn, event, group, now)
                    return False
                await conn.execute(
                    "update dispatcher.group_lanes set running_delivery_id = $2"
                    " where group_name = $1",
                    group,
                    delivery_id,
                )
    except _Handled:
        return False
    return True


async def _wait_for_webhook(
    conn: asyncpg.Connection, cause: Event, waiting: int | None, now: datetime
) -> None:
    request = cause.data
    if waiting is not None:
        # Another slot already waits: this one is skipped (CONTRACT §13).
        await _follow(
            conn,
            cause,
            NewEvent(
                EventType.DELIVERY_SKIPPED,
                {
                    **delivery_fields(request),
                    "attempt": 0,
                    "status": "skipped",
                    "reason": "still_running",
                    "skipped_count": 1,
                    "policy": DELAY,
                },
            ),
            now,
        )
        log.info("delivery_skipped", reason="still_running")
        return
    await conn.execute(
        "update dispatcher.pending set waiting_delivery_id = $2, waiting_since = $3"
        " where webhook_id = $1",
        request["webhook_id"],
        request["delivery_id"],
        now,
    )
    await _follow(
        conn,
        cause,
        NewEvent(EventType.DELIVERY_QUEUED, {**delivery_fields(request), "waits_for": "webhook"}),
        now,
    )
    log.info("delivery_queued", waits_for="webhook")


async def _wait_for_group(
    conn: asyncpg.Connection, cause: Event, group: str, now: datetime
) -> None:
    request = cause.data
    await conn.execute(
        """
        insert into dispatcher.group_queue (delivery_id, group_name, webhook_id, order_at,
                                            queued_at)
        values ($1, $2, $3, $4, $5)
        on conflict (delivery_id) do nothing
        """,
        request["delivery_id"],
        group,
        request["webhook_id"],
        _order_at(request, cause.occurred_at),
        now,
    )
    await _follow(
        conn,
        cause,
        NewEvent(
            EventType.DELIVERY_QUEUED,
            {**delivery_fields(request), "waits_for": "group", "execution_group": group},
        ),
        now,
    )
    log.info("delivery_queued", waits_for="group", execution_group=group)


def _order_at(request: dict[str, Any], requested_at: datetime) -> datetime:
    """Slot order; a manual trigger (no slot) joins at the time it was requested."""
    slot = request.get("scheduled_for")
    return datetime.fromisoformat(slot) if slot else requested_at


# --- a holder finished: hand its lanes on ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Waiter:
    """A delivery whose webhook lane has just been freed for it."""

    webhook_id: int
    delivery_id: int
    since: datetime


@dataclass
class _Queued:
    """A waiting delivery as its stream tells it: its request, and where to append."""

    request: dict[str, Any]
    version: int
    requested_at: datetime


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
                "insert into dispatcher.pending (webhook_id, delivery_id) values ($1, $2)"
                " on conflict (webhook_id) do nothing",
                waiter.webhook_id,
                waiter.delivery_id,
            )
            group = group_of(state.target)
            if not group:
                self._release(q, state.target, waiter.since)
                continue
            await self.conn.execute(_LOCK_GROUP, group)
            await self.conn.execute(
                """
                insert into dispatcher.group_queue (delivery_id, group_name, webhook_id,
                                                    order_at, queued_at)
                values ($1, $2, $3, $4, $5)
                on conflict (delivery_id) do nothing
                """,
                waiter.delivery_id,
                group,
                waiter.webhook_id,
                _order_at(q.request, q.requested_at),
                waiter.since,
            )
            self.groups.add(group)

    async def _next_in_group(self, group: str) -> None:
        running = await self.conn.fetchval(
            "select running_delivery_id from dispatcher.group_lanes where group_name = $1"
            " for update",
            group,
        )
        if running is not None:
            return
        while True:
            head = await self.conn.fetchrow(
                """
                delete from dispatcher.group_queue where delivery_id = (
                    select delivery_id from dispatcher.group_queue where group_name = $1
                    order by order_at, delivery_id limit 1 for update)
                returning delivery_id, webhook_id, queued_at
                """,
                group,
            )
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
            await self.conn.execute(
                "update dispatcher.group_lanes set running_delivery_id = $2 where group_name = $1",
                group,
                head["delivery_id"],
            )
            self._release(queued, state.target, head["queued_at"], group)
            return

    async def _free_webhook_lane(self, webhook_id: int, delivery_id: int) -> None:
        """A skipped group waiter may hold its webhook's lane (DELAY): pass that on too."""
        row = await self.conn.fetchrow(
            "delete from dispatcher.pending where webhook_id = $1 and delivery_id = $2"
            " returning waiting_delivery_id, waiting_since",
            webhook_id,
            delivery_id,
        )
        if row is not None and row["waiting_delivery_id"] is not None:
            self.waiters.append(
                Waiter(webhook_id, row["waiting_delivery_id"], row["waiting_since"])
            )

    def _release(
        self, q: _Queued, target: dict[str, Any], since: datetime, group: str = ""
    ) -> None:
        queued_ms = max(int((self.now - since).total_seconds() * 1000), 0)
        data = {**q.request, "target": target, "queued_ms": queued_ms}
        if group:
            # The group it holds from now on (the webhook's may have changed meanwhile):
            # its outcome must release this one.
            data["execution_group"] = group
        self._append(q, NewEvent(EventType.DELIVERY_RELEASED, data))
        log.info("delivery_released", delivery_id=data["delivery_id"], queued_ms=queued_ms)

    def _skip(self, q: _Queued, state: _Webhook | None) -> None:
        reason = "deleted" if state is None or state.deleted else "disabled"
        data = {
            **delivery_fields(q.request),
            "attempt": 0,
            "status": "skipped",
            "reason": reason,
            "skipped_count": 1,
        }
        self._append(q, NewEvent(EventType.DELIVERY_SKIPPED, data))
        log.info("delivery_skipped", delivery_id=data["delivery_id"], reason=reason)

    def _append(self, q: _Queued, event: NewEvent) -> None:
        stream = delivery_stream(q.request["delivery_id"])
        self.appends.append((stream, q.version, event, Causation.new(actor="dispatcher")))


async def hand_on(
    conn: asyncpg.Connection,
    *,
    waiters: Iterable[Waiter],
    finished: Iterable[int],
    now: datetime,
) -> None:
    """In the transaction that recorded deliveries' final outcomes: give the freed webhook
    lanes to their waiters (`waiters`, returned by the release of `dispatcher.pending`)
    and the group lanes the `finished` deliveries held to the next in each group."""
    promotion = _Promotion(conn, now, waiters=list(waiters))
    ids = sorted(set(finished))
    if ids:
        freed = await conn.fetch(
            "update dispatcher.group_lanes set running_delivery_id = null"
            " where running_delivery_id = any($1::bigint[]) returning group_name",
            ids,
        )
        promotion.groups.update(r["group_name"] for r in freed)
    if promotion.waiters or promotion.groups:
        await promotion.run()


_RELEASE = """
delete from dispatcher.pending p using unnest($1::bigint[], $2::bigint[])
    as r(webhook_id, delivery_id)
where p.webhook_id = r.webhook_id and p.delivery_id = r.delivery_id
returning p.webhook_id, p.waiting_delivery_id, p.waiting_since
"""


async def release(
    conn: asyncpg.Connection,
    pending: list[tuple[int, int]],
    finished_in_groups: list[int],
    now: datetime,
) -> None:
    """Release what finished deliveries held: their webhooks' `pending` rows (FORBID and
    DELAY; `pending` = (webhook_id, delivery_id) pairs) and, for `finished_in_groups`,
    their group lanes; then hand both on. One statement when nobody waits."""
    waiters: list[Waiter] = []
    if pending:
        pending = sorted(pending)  # one lock order for every replica
        rows = await conn.fetch(_RELEASE, [w for w, _ in pending], [d for _, d in pending])
        waiters = [
            Waiter(r["webhook_id"], r["waiting_delivery_id"], r["waiting_since"])
            for r in rows
            if r["waiting_delivery_id"] is not None
        ]
    await hand_on(conn, waiters=waiters, finished=finished_in_groups, now=now)


# --- reading what the promotion needs ------------------------------------------------------


async def _load(conn: asyncpg.Connection, delivery_ids: list[int]) -> dict[int, _Queued]:
    """The first request of each waiting delivery, and its stream's version."""
    rows = await conn.fetch(
        """
        select e.data, e.occurred_at,
               (select max(x.version) from eventstore.events x where x.stream = e.stream)
                   as version
        from eventstore.events e
        where e.stream = any($1::text[]) and e.version = 1
        """,
        [delivery_stream(d) for d in delivery_ids],
    )
    return {
        int(r["data"]["delivery_id"]): _Queued(dict(r["data"]), r["version"], r["occurred_at"])
        for r in rows
    }


@dataclass(frozen=True, slots=True)
class _Webhook:
    target: dict[str, Any]
    deleted: bool
    disabled: bool  # by the platform (410 Gone, too many failures), not paused by an admin

    @property
    def gone(self) -> bool:
        return self.deleted or self.disabled


async def _webhooks(conn: asyncpg.Connection, webhook_ids: set[int]) -> dict[int, _Webhook]:
    """Each webhook as its stream tells it now (the dispatcher keeps no copy of webhooks:
    this is the rare path of a promotion)."""
    rows = await conn.fetch(
        # Webhook streams are kept forever: their partition alone.
        "select stream, type, data from eventstore.events_kept where stream = any($1::text[])"
        " order by stream, version",
        [webhook_stream(w) for w in sorted(webhook_ids)],
    )
    config: dict[str, dict[str, Any]] = {}
    deleted: set[str] = set()
    disabled: set[str] = set()
    for r in rows:
        stream, kind, data = r["stream"], r["type"], r["data"]
        if kind in (EventType.WEBHOOK_CREATED, EventType.WEBHOOK_UPDATED):
            config[stream] = dict(data["config"])
            if "enabled" in data.get("changed", []) and data["config"].get("enabled"):
                disabled.discard(stream)  # re-enabled by an admin
        elif kind == EventType.WEBHOOK_DISABLED:
            disabled.add(stream)
        elif kind == EventType.WEBHOOK_DELETED:
            deleted.add(stream)
    return {
        w: _Webhook(target_of(config[s]), s in deleted, s in disabled)
        for w in webhook_ids
        if (s := webhook_stream(w)) in config
    }


def released_request(event: Event) -> dict[str, Any]:
    """The request a `delivery.released` event stands for (its first attempt)."""
    return {k: v for k, v in event.data.items() if k != "queued_ms"}
