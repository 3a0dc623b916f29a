"""`alerts(open, limit)`: the admin read model of alerts (CONTRACT §12), newest first."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql import queries as sql
from cronhooks_admin.graphql.bindables import query
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_common.graphql_support import bad_input

MAX_LIMIT = 500


@query.field("alerts")
async def resolve_alerts(
    _: Any, info: GraphQLResolveInfo[Context], open: bool | None = None, limit: int = 100
) -> list[GraphQLObject]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    return [dict(r) for r in await info.context.pool.fetch(sql.ALERTS, open, limit)]
