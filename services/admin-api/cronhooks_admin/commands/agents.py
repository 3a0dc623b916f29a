"""Agents, as admins register them (CONTRACT §9): create, rotate the token, delete.

The token is shown once and stored hashed; a token replaced by `rotateAgentToken` is
remembered in `admin.agent_retired_tokens`, so that it is refused as `invalid_client`
rather than unknown (auth.py). Each change appends to the agent's stream (`agent.*`) in
the transaction that updates `admin.agents`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, TypedDict

import asyncpg

from cronhooks_admin.auth import Admin, hash_token
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.store import record, record_next
from cronhooks_admin.commands.triggers import cancel_armed
from cronhooks_admin.commands.validation import check_url
from cronhooks_admin.errors import InputError, NotFound
from cronhooks_common.clock import Clock
from cronhooks_common.events import AgentCreated, AgentDeleted, AgentTokenRotated, agent_stream

AGENT_TOKEN_PREFIX = "chg_"
MAX_INSTANCE_ID = 200
MAX_DESCRIPTION = 4096


def new_agent_token() -> str:
    return AGENT_TOKEN_PREFIX + secrets.token_urlsafe(32)


class CreateAgentInput(TypedDict):
    """`createAgent`'s input as Ariadne hands it over (its defaults filled in), not yet
    judged: the checks below do."""

    instance_id: str
    callback_url: str
    description: str


def check_instance_id(value: Any) -> str:
    instance_id = value or ""
    if not isinstance(instance_id, str) or not 1 <= len(instance_id) <= MAX_INSTANCE_ID:
        raise InputError("instanceId", f"must be 1 to {MAX_INSTANCE_ID} characters")
    if not instance_id.isprintable() or " " in instance_id:
        raise InputError("instanceId", "must be printable, without spaces")
    return instance_id


def check_description(value: Any) -> str:
    description: str = value or ""
    if len(description) > MAX_DESCRIPTION:
        raise InputError("description", f"must be at most {MAX_DESCRIPTION} characters")
    if any(ord(c) < 0x20 and c not in "\n\t" for c in description):
        raise InputError("description", "must not contain NUL or control characters")
    return description


@dataclass(frozen=True, slots=True)
class Agents:
    pool: asyncpg.Pool
    clock: Clock
    allow_private: bool

    async def create(self, fields: CreateAgentInput, admin: Admin) -> tuple[int, str]:
        instance_id = check_instance_id(fields.get("instance_id"))
        try:
            callback_url = check_url(
                fields.get("callback_url") or "", allow_private=self.allow_private
            )
        except InputError as exc:
            raise InputError("callbackUrl", exc.reason) from None  # the GraphQL input's name
        description = check_description(fields.get("description"))
        token = new_agent_token()
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(sql.INSTANCE_TAKEN, instance_id):
                raise InputError("instanceId", f"an agent with instance {instance_id!r} exists")
            agent_id: int = await conn.fetchval(sql.NEXT_AGENT_ID)
            await conn.execute(
                sql.INSERT_AGENT,
                agent_id,
                instance_id,
                callback_url,
                description,
                hash_token(token),
                now,
                admin.actor,
            )
            created = AgentCreated(
                agent_id=agent_id,
                instance_id=instance_id,
                callback_url=callback_url,
                description=description,
            )
            await record(
                conn, agent_stream(agent_id), 0, [created], actor=admin.actor, now=self.clock.now()
            )
        return agent_id, token

    async def rotate_token(self, agent_id: int, admin: Admin) -> str:
        token = new_agent_token()
        async with self.pool.acquire() as conn, conn.transaction():
            old_hash = await conn.fetchval(sql.LIVE_AGENT_TOKEN, agent_id)
            if old_hash is None:
                raise NotFound("agent", agent_id)
            await conn.execute(sql.RETIRE_TOKEN, old_hash, agent_id, self.clock.now())
            await conn.execute(sql.SET_AGENT_TOKEN, agent_id, hash_token(token))
            rotated = AgentTokenRotated(agent_id=agent_id)
            await record_next(
                conn, agent_stream(agent_id), rotated, actor=admin.actor, now=self.clock.now()
            )
        return token

    async def delete(self, agent_id: int, admin: Admin) -> int:
        """Soft delete; its armed triggers are cancelled."""
        async with self.pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(sql.DELETE_AGENT, agent_id, self.clock.now()) is None:
                raise NotFound("agent", agent_id)
            deleted = AgentDeleted(agent_id=agent_id)
            await record_next(
                conn, agent_stream(agent_id), deleted, actor=admin.actor, now=self.clock.now()
            )
            for job in await conn.fetch(sql.ARMED_JOB_IDS, agent_id):
                await cancel_armed(conn, agent_id, job["job_id"], admin.actor, self.clock)
        return agent_id
