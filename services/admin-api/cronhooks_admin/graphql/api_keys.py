"""API keys (CONTRACT §5): the list, create (the key shown once) and revoke."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.commands.api_keys import CreateApiKeyInput
from cronhooks_admin.graphql.bindables import mutation, query
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.errors import run_command
from cronhooks_admin.graphql.shapes import GraphQLObject

Info = GraphQLResolveInfo[Context]


@query.field("apiKeys")
async def resolve_api_keys(_: Any, info: Info) -> list[GraphQLObject]:
    return [dict(row) for row in await info.context.commands.api_keys.list()]


@mutation.field("createApiKey")
async def resolve_create_api_key(_: Any, info: Info, input: CreateApiKeyInput) -> GraphQLObject:
    ctx = info.context
    row, key = await run_command(lambda: ctx.commands.api_keys.create(input, ctx.admin))
    return {"api_key": dict(row), "key": key}


@mutation.field("revokeApiKey")
async def resolve_revoke_api_key(_: Any, info: Info, id: int) -> GraphQLObject:
    ctx = info.context
    return {"api_key": dict(await run_command(lambda: ctx.commands.api_keys.revoke(id, ctx.admin)))}
