"""What a webhook's agents reported they cost (CONTRACT §16.1 `costTotals`): the daily sums
the dispatcher keeps in `shared.daily_costs` (cronhooks_common.daily_costs), read through
the request's DataLoader. `maxCostPerDay` is a column of the read model, resolved by name."""

from __future__ import annotations

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql.bindables import change_webhook, cron_webhook
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_common.graphql_support import bad_input

Info = GraphQLResolveInfo[Context]
MAX_DAYS = 90


@cron_webhook.field("costTotals")
@change_webhook.field("costTotals")
async def resolve_webhook_cost_totals(
    webhook: GraphQLObject, info: Info, days: int | None = 7
) -> list[GraphQLObject]:
    """The window's days in the webhook's time zone (UTC for change webhooks)."""
    if days is None or not 1 <= days <= MAX_DAYS:  # null is allowed by `Int = 7`
        raise bad_input("days", f"must be from 1 to {MAX_DAYS}")
    zone = webhook.get("timezone") or "UTC"
    return await info.context.cost_totals.load((webhook["id"], zone, days))
