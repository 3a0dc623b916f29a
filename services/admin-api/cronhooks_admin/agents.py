"""Agents and their one-shot triggers (CONTRACT §9): the command side.

Agents are registered by admins (token shown once, stored hashed; a token replaced by
`rotateAgentToken` is remembered in `admin.agent_retired_tokens`, so that it is refused as
`invalid_client` rather than unknown). With its token an agent arms, re-arms and cancels
one-shot triggers per `job_id`; `fire_at` is kept as the agent spelled it, to be echoed.
Each change appends to the job's stream (`trigger.armed` / `trigger.cancelled`) in the
transaction that updates `admin.agent_jobs`; the scheduler turns those events into a
timer whose key is the job, so a new `fire_at` replaces the old one in place: never zero
timers, never two.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_admin.auth import Admin, hash_token
from cronhooks_admin.commands import NotFound
from cronhooks_admin.validation import InputError, check_url
from cronhooks_common import eventstore
from cronhooks_common.clock import Clock, iso
from cronhooks_common.events import Causation, EventType, NewEvent, agent_stream, job_stream

AGENT_TOKEN_PREFIX = "chg_"
MAX_JOB_ID = 200
MAX_DEDUP_KEY = 500
MAX_FIRE_AT = 64  # far more than any ISO 8601 spelling of an instant needs


def new_agent_token() -> str:
    return AGENT_TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    id: int
    instance_id: str
    callback_url: str

    @property
    def actor(self) -> str:
        return f"agent:{self.instance_id}"


class InvalidClient(Exception):
    """A token that was issued but is revoked for good: its agent was deleted, or
    `rotateAgentToken` replaced it."""


async def agent_for_token(pool: asyncpg.Pool, authorization: str | None) -> AgentIdentity | None:
    """The agent of a Bearer token; None if there is none or it was never issued."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    # Issued tokens are ASCII; anything else (lone surrogates included) was never issued.
    if scheme.lower() != "bearer" or not token or not token.isascii():
        return None
    token_hash = hash_token(token)
    row = await pool.fetchrow(
        "select id, instance_id, callback_url, deleted_at from admin.agents where token_hash = $1",
        token_hash,
    )
    if row is None:
        retired = await pool.fetchval(
            "select 1 from admin.agent_retired_tokens where token_hash = $1", token_hash
        )
        if retired:
            raise InvalidClient
        return None
    if row["deleted_at"] is not None:
        raise InvalidClient
    return AgentIdentity(row["id"], row["instance_id"], row["callback_url"])


def check_job_id(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_JOB_ID:
        raise InputError("job_id", f"must be a string of 1 to {MAX_JOB_ID} characters")
    if not value.isprintable():
        raise InputError("job_id", "must contain printable characters only")
    return value


def check_fire_at(value: Any) -> datetime:
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


def check_callback_url(value: Any, default: str, *, allow_private: bool) -> str:
    # Absent, null or "": the agent's own. Any other value is checked (0 or false is no URL).
    callback = default if value is None or value == "" else value
    if not isinstance(callback, str):
        raise InputError("agent_callback_url", "must be a string")
    try:
        return check_url(callback, allow_private=allow_private)
    except InputError as exc:
        raise InputError("agent_callback_url", exc.reason) from None


def check_dedup_key(value: Any) -> str | None:
    if value is not None and (
        not isinstance(value, str) or len(value) > MAX_DEDUP_KEY or not value.isprintable()
    ):
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


def check_provision(
    body: dict[str, Any], default_callback: str, *, allow_private: bool
) -> Provision:
    job_id = check_job_id(body.get("job_id"))
    fire_at = check_fire_at(body.get("fire_at"))
    return Provision(
        job_id=job_id,
        fire_at=fire_at,
        fire_at_text=body["fire_at"],
        callback_url=check_callback_url(
            body.get("agent_callback_url"), default_callback, allow_private=allow_private
        ),
        dedup_key=check_dedup_key(body.get("dedup_key")),
    )


@dataclass(frozen=True, slots=True)
class Agents:
    pool: asyncpg.Pool
    clock: Clock
    allow_private: bool

    # --- admin commands ------------------------------------------------------------------

    async def create(self, fields: dict[str, Any], admin: Admin) -> tuple[int, str]:
        instance_id = fields.get("instance_id") or ""
        if not isinstance(instance_id, str) or not 1 <= len(instance_id) <= 200:
            raise InputError("instanceId", "must be 1 to 200 characters")
        if not instance_id.isprintable() or " " in instance_id:
            raise InputError("instanceId", "must be printable, without spaces")
        try:
            callback_url = check_url(
                fields.get("callback_url") or "", allow_private=self.allow_private
            )
        except InputError as exc:
            raise InputError("callbackUrl", exc.reason) from None  # the GraphQL input's name
        description = fields.get("description") or ""
        if len(description) > 4096:
            raise InputError("description", "must be at most 4096 characters")
        if any(ord(c) < 0x20 and c not in "\n\t" for c in description):
            raise InputError("description", "must not contain NUL or control characters")
        token = new_agent_token()
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            taken = await conn.fetchval(
                "select 1 from admin.agents where instance_id = $1 and deleted_at is null",
                instance_id,
            )
            if taken:
                raise InputError("instanceId", f"an agent with instance {instance_id!r} exists")
            agent_id: int = await conn.fetchval("select nextval('admin.agent_ids')")
            await conn.execute(
                """
                insert into admin.agents
                    (id, instance_id, callback_url, description, token_hash, created_at,
                     created_by)
                values ($1, $2, $3, $4, $5, $6, $7)
                """,
                agent_id,
                instance_id,
                callback_url,
                description,
                hash_token(token),
                now,
                admin.actor,
            )
            await self._append(
                conn,
                agent_stream(agent_id),
                0,
                EventType.AGENT_CREATED,
                {
                    "agent_id": agent_id,
                    "instance_id": instance_id,
                    "callback_url": callback_url,
                    "description": description,
                },
                admin.actor,
            )
        return agent_id, token

    async def rotate_token(self, agent_id: int, admin: Admin) -> str:
        token = new_agent_token()
        async with self.pool.acquire() as conn, conn.transaction():
            old_hash = await conn.fetchval(
                "select token_hash from admin.agents where id = $1 and deleted_at is null"
                " for update",
                agent_id,
            )
            if old_hash is None:
                raise NotFound("agent", agent_id)
            await conn.execute(
                "insert into admin.agent_retired_tokens (token_hash, agent_id, retired_at)"
                " values ($1, $2, $3) on conflict do nothing",
                old_hash,
                agent_id,
                self.clock.now(),
            )
            await conn.execute(
                "update admin.agents set token_hash = $2 where id = $1", agent_id, hash_token(token)
            )
            await self._append_next(
                conn,
                agent_stream(agent_id),
                EventType.AGENT_TOKEN_ROTATED,
                {"agent_id": agent_id},
                admin.actor,
            )
        return token

    async def delete(self, agent_id: int, admin: Admin) -> int:
        """Soft delete; its armed triggers are cancelled."""
        async with self.pool.acquire() as conn, conn.transaction():
            updated = await conn.fetchval(
                "update admin.agents set deleted_at = $2 where id = $1 and deleted_at is null"
                " returning id",
                agent_id,
                self.clock.now(),
            )
            if updated is None:
                raise NotFound("agent", agent_id)
            await self._append_next(
                conn,
                agent_stream(agent_id),
                EventType.AGENT_DELETED,
                {"agent_id": agent_id},
                admin.actor,
            )
            jobs = await conn.fetch(
                "select job_id from admin.agent_jobs where agent_id = $1 and state = 'armed'",
                agent_id,
            )
            for job in jobs:
                await self._cancel_locked(conn, agent_id, job["job_id"], admin.actor)
        return agent_id

    # --- agent commands ------------------------------------------------------------------

    async def provision(self, agent: AgentIdentity, body: dict[str, Any]) -> str:
        wanted = check_provision(body, agent.callback_url, allow_private=self.allow_private)
        stream = job_stream(agent.id, wanted.job_id)
        async with self.pool.acquire() as conn, conn.transaction():
            # Serialises provisions of one job: the row, or the advisory lock of a new one.
            await conn.execute("select pg_advisory_xact_lock(hashtext($1))", stream)
            row = await conn.fetchrow(
                "select * from admin.agent_jobs where agent_id = $1 and job_id = $2",
                agent.id,
                wanted.job_id,
            )
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
        await self._append(
            conn,
            stream,
            version,
            EventType.TRIGGER_ARMED,
            {
                "agent_id": agent.id,
                "instance_id": agent.instance_id,
                "job_id": wanted.job_id,
                "schedule_id": str(schedule_id),
                "fire_at": iso(wanted.fire_at),  # what the scheduler parses
                "fire_at_text": wanted.fire_at_text,  # what the callback echoes
                "callback_url": wanted.callback_url,
                "dedup_key": wanted.dedup_key,
                "generation": version + 1,
            },
            agent.actor,
        )
        await conn.execute(
            """
            insert into admin.agent_jobs
                (agent_id, job_id, schedule_id, fire_at, fire_at_text, callback_url, dedup_key,
                 generation, state, updated_at)
            values ($1, $2, $3, $4, $5, $6, $7, $8, 'armed', $9)
            on conflict (agent_id, job_id) do update set
                fire_at = excluded.fire_at, fire_at_text = excluded.fire_at_text,
                callback_url = excluded.callback_url, dedup_key = excluded.dedup_key,
                generation = excluded.generation, state = 'armed',
                updated_at = excluded.updated_at
            """,
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

    async def cancel(self, agent: AgentIdentity, body: dict[str, Any]) -> None:
        job_id = check_job_id(body.get("job_id"))
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "select pg_advisory_xact_lock(hashtext($1))", job_stream(agent.id, job_id)
            )
            await self._cancel_locked(conn, agent.id, job_id, agent.actor)

    async def jobs(self, agent: AgentIdentity) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "select job_id, fire_at, fire_at_text, schedule_id, callback_url"
            " from admin.agent_jobs where agent_id = $1 and state = 'armed'"
            " order by fire_at, job_id",
            agent.id,
        )
        return [
            {
                "job_id": r["job_id"],
                # As provisioned, byte for byte: clients compare strings to decide re-arming.
                "fire_at": r["fire_at_text"] or iso(r["fire_at"]),
                "schedule_id": str(r["schedule_id"]),
                "agent_callback_url": r["callback_url"],
            }
            for r in rows
        ]

    async def _cancel_locked(
        self, conn: asyncpg.Connection, agent_id: int, job_id: str, actor: str
    ) -> None:
        row = await conn.fetchrow(
            "select schedule_id, generation from admin.agent_jobs"
            " where agent_id = $1 and job_id = $2 and state = 'armed'",
            agent_id,
            job_id,
        )
        if row is None:
            return  # unknown or no longer armed: cancelling is idempotent
        await self._append_next(
            conn,
            job_stream(agent_id, job_id),
            EventType.TRIGGER_CANCELLED,
            {
                "agent_id": agent_id,
                "job_id": job_id,
                "schedule_id": str(row["schedule_id"]),
                "generation": row["generation"],
            },
            actor,
        )
        await conn.execute(
            "update admin.agent_jobs set state = 'cancelled', updated_at = $3"
            " where agent_id = $1 and job_id = $2",
            agent_id,
            job_id,
            self.clock.now(),
        )

    async def _append_next(
        self, conn: asyncpg.Connection, stream: str, kind: str, data: dict[str, Any], actor: str
    ) -> None:
        """Append after whatever the stream holds (callers hold the lock that orders them)."""
        version = await eventstore.stream_version(conn, stream)
        await self._append(conn, stream, version, kind, data, actor)

    async def _append(
        self,
        conn: asyncpg.Connection,
        stream: str,
        version: int,
        kind: str,
        data: dict[str, Any],
        actor: str,
    ) -> None:
        await eventstore.append(
            conn,
            stream,
            [NewEvent(kind, data)],
            expected_version=version,
            causation=Causation.new(actor=actor),
            occurred_at=self.clock.now(),
        )
