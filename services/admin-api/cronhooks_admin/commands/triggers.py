"""One-shot triggers, as agents arm and cancel them (CONTRACT §9, the agent-cron API).

With its token an agent arms, re-arms and cancels one-shot triggers per `job_id`;
`fire_at` is kept as the agent spelled it, to be echoed. Each change appends to the job's
stream (`trigger.armed` / `trigger.cancelled`) in the transaction that updates
`admin.agent_jobs`; the scheduler turns those events into a timer whose key is the job, so
a new `fire_at` replaces the old one in place: never zero timers, never two.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import asyncpg

from cronhooks_admin.auth import AgentIdentity
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.store import record, record_next
from cronhooks_admin.commands.validation import check_url
from cronhooks_admin.errors import InputError
from cronhooks_common import eventstore
from cronhooks_common.clock import Clock, iso
from cronhooks_common.events import TriggerArmed, TriggerCancelled, job_stream

MAX_JOB_ID = 200
MAX_DEDUP_KEY = 500
MAX_FIRE_AT = 64  # far more than any ISO 8601 spelling of an instant needs


# The checks take a request body's values as they came (any JSON), and judge the type too.


def check_job_id(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_JOB_ID:
        raise InputError("job_id", f"must be a string of 1 to {MAX_JOB_ID} characters")
    if not value.isprintable():
        raise InputError("job_id", "must contain printable characters only")
    return value


def check_fire_at(value: object) -> datetime:
    if not isinstance(value, str) or len(value) > MAX_FIRE_AT:
        raise InputError(
            "fire_at",
            f"must be an ISO 8601 date-time string with an offset, at most {MAX_FIRE_AT}"
            " characters",
        )
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError("fire_at", f"not an ISO 8601 date-time: {value!r}") from None
    if moment.tzinfo is None:
        raise InputError("fire_at", "needs a UTC offset (e.g. +00:00 or Z)")
    return moment


def check_callback_url(value: object, default: str, *, allow_private: bool) -> str:
    # Absent, null or "": the agent's own. Any other value is checked (0 or false is no URL).
    callback = default if value is None or value == "" else value
    if not isinstance(callback, str):
        raise InputError("agent_callback_url", "must be a string")
    try:
        return check_url(callback, allow_private=allow_private)
    except InputError as exc:
        raise InputError("agent_callback_url", exc.reason) from None


def check_dedup_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_DEDUP_KEY or not value.isprintable():
        raise InputError("dedup_key", f"must be a string of at most {MAX_DEDUP_KEY} characters")
    return value


@dataclass(frozen=True, slots=True)
class Provision:
    """A checked `POST /api/agent-cron/provision` body."""

    job_id: str
    fire_at: datetime
    fire_at_text: str  # exactly as sent: the list and the callback echo it
    callback_url: str
    dedup_key: str | None

    def armed_as(self, row: asyncpg.Record) -> bool:
        """Whether the job's row is armed already for the same instant, spelled the same
        (another spelling re-arms in place, so the list and the callback both echo it),
        with the same callback and key."""
        return bool(
            row["state"] == "armed"
            and row["fire_at"] == self.fire_at
            and row["fire_at_text"] == self.fire_at_text
            and row["callback_url"] == self.callback_url
            and row["dedup_key"] == self.dedup_key
        )


class ArmedJob(TypedDict):
    """An armed job as `GET /api/agent-cron/list` answers it."""

    job_id: str
    fire_at: str
    schedule_id: str
    agent_callback_url: str


def check_provision(
    body: Mapping[str, object], default_callback: str, *, allow_private: bool
) -> Provision:
    """The provision body (any JSON object): each field checked, type and value."""
    job_id = check_job_id(body.get("job_id"))
    text = body.get("fire_at")
    fire_at = check_fire_at(text)
    assert isinstance(text, str)  # check_fire_at took nothing else
    return Provision(
        job_id=job_id,
        fire_at=fire_at,
        fire_at_text=text,
        callback_url=check_callback_url(
            body.get("agent_callback_url"), default_callback, allow_private=allow_private
        ),
        dedup_key=check_dedup_key(body.get("dedup_key")),
    )


async def cancel_armed(
    conn: asyncpg.Connection, agent_id: int, job_id: str, actor: str, clock: Clock
) -> None:
    """Cancel the job if it is armed (callers hold its lock). Unknown or no longer armed:
    nothing to do, cancelling is idempotent."""
    row = await conn.fetchrow(sql.ARMED_JOB, agent_id, job_id)
    if row is None:
        return
    cancelled = TriggerCancelled(
        agent_id=agent_id,
        job_id=job_id,
        schedule_id=str(row["schedule_id"]),
        generation=row["generation"],
    )
    await record_next(conn, job_stream(agent_id, job_id), cancelled, actor=actor, now=clock.now())
    await conn.execute(sql.CANCEL_JOB, agent_id, job_id, clock.now())


@dataclass(frozen=True, slots=True)
class Triggers:
    pool: asyncpg.Pool
    clock: Clock
    allow_private: bool

    async def provision(self, agent: AgentIdentity, body: Mapping[str, object]) -> str:
        wanted = check_provision(body, agent.callback_url, allow_private=self.allow_private)
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(sql.LOCK_JOB, job_stream(agent.id, wanted.job_id))
            row = await conn.fetchrow(sql.JOB, agent.id, wanted.job_id)
            if row is not None and wanted.armed_as(row):
                return str(row["schedule_id"])  # the same call again: already armed
            schedule_id = row["schedule_id"] if row is not None else uuid.uuid4()
            await self._arm(conn, agent, wanted, schedule_id)
        return str(schedule_id)

    async def _arm(
        self, conn: asyncpg.Connection, agent: AgentIdentity, wanted: Provision, schedule_id: Any
    ) -> None:
        stream = job_stream(agent.id, wanted.job_id)
        version = await eventstore.stream_version(conn, stream)
        armed = TriggerArmed(
            agent_id=agent.id,
            instance_id=agent.instance_id,
            job_id=wanted.job_id,
            schedule_id=str(schedule_id),
            fire_at=iso(wanted.fire_at),  # what the scheduler parses
            fire_at_text=wanted.fire_at_text,  # what the callback echoes
            callback_url=wanted.callback_url,
            dedup_key=wanted.dedup_key,
            generation=version + 1,
        )
        await record(conn, stream, version, [armed], actor=agent.actor, now=self.clock.now())
        await conn.execute(
            sql.ARM_JOB,
            agent.id,
            wanted.job_id,
            schedule_id,
            wanted.fire_at,
            wanted.fire_at_text,
            wanted.callback_url,
            wanted.dedup_key,
            version + 1,
            self.clock.now(),
        )

    async def cancel(self, agent: AgentIdentity, body: Mapping[str, object]) -> None:
        job_id = check_job_id(body.get("job_id"))
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(sql.LOCK_JOB, job_stream(agent.id, job_id))
            await cancel_armed(conn, agent.id, job_id, agent.actor, self.clock)

    async def jobs(self, agent: AgentIdentity) -> list[ArmedJob]:
        """The agent's armed jobs, as the list answers them."""
        return [
            {
                "job_id": r["job_id"],
                # As provisioned, byte for byte: clients compare strings to decide re-arming.
                "fire_at": r["fire_at_text"] or iso(r["fire_at"]),
                "schedule_id": str(r["schedule_id"]),
                "agent_callback_url": r["callback_url"],
            }
            for r in await self.pool.fetch(sql.ARMED_JOBS, agent.id)
        ]
