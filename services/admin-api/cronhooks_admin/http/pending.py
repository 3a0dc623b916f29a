"""What `/debug/wait_all_jobs` waits for: work the platform still owes, judged from the
database, so it holds whichever replica answers and whatever process does the work.

Pending is any of:
- a delivery that has not ended: requested and not yet sent, in flight, waiting for a
  retry (`delivery.attempt_failed` leaves it pending) or for the importer (`importing`);
- events the read models do not show yet (the projector's checkpoint is behind the event
  store), since such an event may be a delivery requested a moment ago;
- note changes the change matcher has not judged yet: they may request deliveries;
- due timers (cron slots, retries, one-shot triggers) the scheduler has not fired yet;
- one-shot triggers whose `fire_at` has passed and that have not fired (their callback is
  in flight or being retried).

The last three read other services' tables (importer's checkpoint, scheduler's timers):
a debug endpoint that must see the whole platform, not a read model of admin-api.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

_PENDING = """
select
    (select count(*) from admin.deliveries where status = 'pending') as deliveries,
    exists (
        select 1 from eventstore.events e, admin.projection_checkpoints c
        where c.name = 'live' and (e.txid, e.position) > (c.txid, c.position)
    ) as unprojected,
    exists (
        select 1 from eventstore.events e, importer.change_matcher_checkpoint c
        where (e.txid, e.position) > (c.txid, c.position) and e.type = 'note.changed'
    ) as unmatched,
    (select count(*) from scheduler.timers where due_at <= $1) as due_timers,
    (select count(*) from admin.agent_jobs where state = 'armed' and fire_at <= $1)
        as due_triggers
"""


async def pending_work(conn: asyncpg.Connection | asyncpg.Pool, now: datetime) -> dict[str, int]:
    """What is still pending at `now`, by kind; only the kinds with something pending
    (an empty answer: nothing is)."""
    row = await conn.fetchrow(_PENDING, now)
    counts = {key: int(value) for key, value in dict(row).items()}
    return {key: n for key, n in counts.items() if n}


_LABELS = {
    "deliveries": "{n} deliveries not ended",
    "unprojected": "events not yet in the read models",
    "unmatched": "note changes not yet matched to change webhooks",
    "due_timers": "{n} due timers not yet fired",
    "due_triggers": "{n} due one-shot triggers not yet fired",
}


def describe(pending: dict[str, int]) -> str:
    """One line for the timeout answer: `2 deliveries not ended, 1 due timers not yet fired`."""
    return ", ".join(_LABELS[kind].format(n=n) for kind, n in pending.items())
