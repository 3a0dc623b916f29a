"""`alerts(open, limit)`: the admin read model of alerts (CONTRACT §12), newest first."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.context import Context
from cronhooks_common.graphql_support import bad_input

MAX_LIMIT = 500

# Alerts of deleted webhooks are left out: a deleted webhook is in no list (CONTRACT §8).
_SQL = """
select a.id, a.webhook_id, a.kind, a.raised_at, a.resolved_at, a.consecutive_failures,
       a.last_error, a.disabled
from admin.alerts a
join admin.webhooks w on w.id = a.webhook_id and w.disabled_at is null
where $1::boolean is null or (a.resolved_at is null) = $1
order by a.raised_at desc, a.id desc
limit $2
"""


async def alerts(
    _: Any, info: GraphQLResolveInfo[Context], open: bool | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    rows = await info.context.pool.fetch(_SQL, open, limit)
    return [dict(r) for r in rows]
