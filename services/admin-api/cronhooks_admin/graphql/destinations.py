"""Destination limits (CONTRACT §17): destinationLimits, destinationHolds,
destinationWaiting, setDestinationLimit."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql.bindables import mutation, query
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.errors import run_command
from cronhooks_admin.graphql.shapes import GraphQLObject

Info = GraphQLResolveInfo[Context]


@query.field("destinationLimits")
async def resolve_destination_limits(_: Any, info: Info) -> list[GraphQLObject]:
    return await info.context.commands.destinations.limits()


@query.field("destinationHolds")
async def resolve_destination_holds(_: Any, info: Info) -> list[GraphQLObject]:
    return await info.context.commands.destinations.holds()


@query.field("destinationWaiting")
async def resolve_destination_waiting(_: Any, info: Info) -> list[GraphQLObject]:
    return await info.context.commands.destinations.waiting()


@mutation.field("setDestinationLimit")
async def resolve_set_destination_limit(
    _: Any,
    info: Info,
    destination: str,
    max_concurrent: int | None = None,
    max_per_second: float | None = None,
) -> GraphQLObject:
    ctx = info.context
    return await run_command(
        lambda: ctx.commands.destinations.set_limit(
            destination, max_concurrent, max_per_second, ctx.admin
        )
    )
