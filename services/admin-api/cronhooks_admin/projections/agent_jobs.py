"""admin.agent_jobs, the outcome of a one-shot trigger (`trigger.fired`). Arming and
cancelling write the row in the agent's own command (commands/triggers.py); the fire
happens elsewhere (scheduler, dispatcher), so its outcome comes back as an event."""

from __future__ import annotations

import asyncpg

from cronhooks_admin.projections import queries as sql
from cronhooks_common.events import Event, TriggerFired


async def on_trigger_fired(conn: asyncpg.Connection, event: Event, p: TriggerFired) -> None:
    await conn.execute(
        sql.TRIGGER_FIRED,
        p.agent_id,
        p.job_id,
        p.generation,
        p.outcome,
        event.occurred_at,
        p.error,
    )
