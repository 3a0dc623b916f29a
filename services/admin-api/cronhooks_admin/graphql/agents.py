"""Agents and their one-shot triggers as admins see them (CONTRACT §9); the agents' own
API is REST (http/agent_api.py)."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.commands.agents import CreateAgentInput
from cronhooks_admin.graphql import queries as sql
from cronhooks_admin.graphql.bindables import mutation, query
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.errors import not_found, run_command
from cronhooks_admin.graphql.shapes import GraphQLObject

Info = GraphQLResolveInfo[Context]


async def _agent_row(info: Info, agent_id: int) -> GraphQLObject:
    row = await info.context.pool.fetchrow(sql.AGENT, agent_id)
    if row is None:
        raise not_found(f"agent {agent_id} not found")
    return dict(row)


@query.field("agents")
async def resolve_agents(_: Any, info: Info) -> list[GraphQLObject]:
    return [dict(r) for r in await info.context.pool.fetch(sql.AGENTS)]


@query.field("agentTriggers")
async def resolve_agent_triggers(_: Any, info: Info, agent_id: int) -> list[GraphQLObject]:
    rows = await info.context.pool.fetch(sql.AGENT_TRIGGERS, agent_id)
    return [{**dict(r), "schedule_id": str(r["schedule_id"])} for r in rows]


@mutation.field("createAgent")
async def resolve_create_agent(_: Any, info: Info, input: CreateAgentInput) -> GraphQLObject:
    ctx = info.context
    agent_id, token = await run_command(lambda: ctx.commands.agents.create(input, ctx.admin))
    return {"agent": await _agent_row(info, agent_id), "access_token": token}


@mutation.field("rotateAgentToken")
async def resolve_rotate_agent_token(_: Any, info: Info, id: int) -> GraphQLObject:
    ctx = info.context
    token = await run_command(lambda: ctx.commands.agents.rotate_token(id, ctx.admin))
    return {"agent": await _agent_row(info, id), "access_token": token}


@mutation.field("deleteAgent")
async def resolve_delete_agent(_: Any, info: Info, id: int) -> GraphQLObject:
    ctx = info.context
    return {"id": await run_command(lambda: ctx.commands.agents.delete(id, ctx.admin))}
