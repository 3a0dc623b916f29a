"""The pause switch (CONTRACT §16.4): deliveryPause, pauseDeliveries, resumeDeliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql.bindables import mutation, query
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.errors import run_command
from cronhooks_admin.graphql.shapes import GraphQLObject

Info = GraphQLResolveInfo[Context]


@query.field("deliveryPause")
async def resolve_delivery_pause(_: Any, info: Info) -> GraphQLObject:
    return await info.context.commands.pause.show()


@mutation.field("pauseDeliveries")
async def resolve_pause_deliveries(
    _: Any, info: Info, reason: str, until: datetime | None = None
) -> GraphQLObject:
    ctx = info.context
    return await run_command(lambda: ctx.commands.pause.pause(until, reason, ctx.admin))


@mutation.field("resumeDeliveries")
async def resolve_resume_deliveries(_: Any, info: Info) -> GraphQLObject:
    ctx = info.context
    return await run_command(lambda: ctx.commands.pause.resume(ctx.admin))
