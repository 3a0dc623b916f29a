"""Step 3, admit: may a delivery's first attempt be sent now? concurrencyPolicy FORBID and
DELAY, and execution groups (CONTRACT §13), decided by Postgres.

A *lane* is something only one delivery may hold at a time, from its first attempt until
it has finished (success or final failure, retries included):

* the webhook lane, `dispatcher.pending`, for FORBID and DELAY webhooks. A FORBID slot
  that finds it taken is skipped (`delivery.skipped`, reason `concurrency`). A DELAY slot
  waits on that row (`waiting_delivery_id`: at most one per webhook, by construction); a
  later one is skipped (reason `still_running`). A manual trigger is neither skipped nor
  delayed: it runs at once and, when it finds the lane free, holds it;
* the group lane, `dispatcher.group_lanes`, for a non-empty `execution_group`: a delivery
  that finds its group busy joins `dispatcher.group_queue`, ordered by slot (a manual
  trigger by the time it was requested), then delivery id.

A delivery takes its webhook lane first, then its group lane; the order is the same
everywhere (handon.py too), so two transactions never wait for each other in a circle.
The webhook lane is taken in its own statement, so two deliveries racing for it cannot
both win; a DELAY or group decision locks the lane's row in the transaction that records
what it decided (`delivery.queued`, or the skip), so a delivery that finds a lane busy and
the finishing holder that looks for a successor (handon.py) cannot miss each other.

Later attempts keep the lanes their first attempt took, and a released delivery was
admitted when its lane was handed on: neither comes here. The hot path pays nothing: a
request without FORBID, DELAY or a group is admitted without a query.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.consumer import claim_events
from cronhooks_common.events import (
    CRON,
    Causation,
    DeliveryQueued,
    DeliveryRequested,
    DeliverySkipped,
    Event,
    NewEvent,
)
from cronhooks_common.events.delivery import DeliveryFieldsData, SkipReason
from cronhooks_dispatcher import queries
from cronhooks_dispatcher.deps import Deps
from cronhooks_dispatcher.handon import order_at
from cronhooks_dispatcher.record import Record

log = structlog.get_logger(__name__)

FORBID = "FORBID"
DELAY = "DELAY"


async def admit(deps: Deps, event: Event, request: DeliveryRequested) -> bool:
    """May this request be sent now? If not, it was recorded as skipped or waiting."""
    if request.attempt != 1:
        return True
    target = request.target
    if target.concurrency_policy == FORBID:
        holder = await deps.pool.fetchval(
            queries.CLAIM_WEBHOOK_LANE, request.webhook_id, request.delivery_id
        )
        # A manual trigger runs regardless; only schedule slots are skipped.
        if holder != request.delivery_id and request.trigger == "schedule":
            skip = _skipped(request, "concurrency", FORBID)
            await deps.writer.write(Record(event, NewEvent.of(skip)))
            log.info("delivery_skipped", reason="concurrency")
            return False
    if request.kind != CRON or not (target.concurrency_policy == DELAY or target.execution_group):
        return True
    return await _through_lanes(deps.pool, event, request, deps.clock.now())


def _skipped(request: DeliveryRequested, reason: SkipReason, policy: str) -> DeliverySkipped:
    fields: DeliveryFieldsData = {**request.fields(), "attempt": 0}
    return DeliverySkipped(**fields, reason=reason, skipped_count=1, policy=policy)


class _Handled(Exception):
    """The request was handled meanwhile (a redelivered message): change nothing."""


async def _through_lanes(
    pool: asyncpg.Pool, event: Event, request: DeliveryRequested, now: datetime
) -> bool:
    """DELAY and execution groups: may it go, or does it wait (recorded here)?"""
    delivery_id = request.delivery_id
    target = request.target
    group = target.execution_group
    try:
        async with pool.acquire() as conn, conn.transaction():
            if target.concurrency_policy == DELAY:
                row = await conn.fetchrow(
                    queries.CLAIM_WEBHOOK_LANE, request.webhook_id, delivery_id
                )
                if row["delivery_id"] != delivery_id and request.trigger == "schedule":
                    await _wait_for_webhook(conn, event, request, row["waiting_delivery_id"], now)
                    return False
            if group:
                running = await conn.fetchval(queries.LOCK_GROUP, group)
                if running is not None and running != delivery_id:
                    await _wait_for_group(conn, event, request, group, now)
                    return False
                await conn.execute(queries.HOLD_GROUP, group, delivery_id)
    except _Handled:
        return False
    return True


async def _wait_for_webhook(
    conn: asyncpg.Connection,
    cause: Event,
    request: DeliveryRequested,
    waiting: int | None,
    now: datetime,
) -> None:
    if waiting is not None:
        # Another slot already waits: this one is skipped (CONTRACT §13).
        await _follow(conn, cause, _skipped(request, "still_running", DELAY), now)
        log.info("delivery_skipped", reason="still_running")
        return
    await conn.execute(queries.WAIT_FOR_WEBHOOK, request.webhook_id, request.delivery_id, now)
    queued = DeliveryQueued(**request.fields(), waits_for="webhook")
    await _follow(conn, cause, queued, now)
    log.info("delivery_queued", waits_for="webhook")


async def _wait_for_group(
    conn: asyncpg.Connection, cause: Event, request: DeliveryRequested, group: str, now: datetime
) -> None:
    await conn.execute(
        queries.JOIN_GROUP,
        request.delivery_id,
        group,
        request.webhook_id,
        order_at(request, cause.occurred_at),
        now,
    )
    queued = DeliveryQueued(**request.fields(), waits_for="group", execution_group=group)
    await _follow(conn, cause, queued, now)
    log.info("delivery_queued", waits_for="group", execution_group=group)


async def _follow(
    conn: asyncpg.Connection, cause: Event, event: DeliveryQueued | DeliverySkipped, now: datetime
) -> None:
    """Record `event` after the request `cause`, claiming the request in the inbox."""
    if not await claim_events(conn, queries.INBOX, [cause]):
        raise _Handled
    try:
        async with conn.transaction():
            causation = Causation.following(cause, "dispatcher")
            await eventstore.append_many(
                conn,
                [(cause.stream, cause.version, NewEvent.of(event), causation)],
                occurred_at=now,
            )
    except eventstore.ConcurrencyError:
        raise _Handled from None
