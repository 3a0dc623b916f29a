"""What a webhook of either kind tells of its deliveries: consecutiveFailures, stats (the
last 24 h and 7 d) and dailyStats (the web page's chart, CONTRACT §10), from the
request's DataLoaders (loaders.py)."""

from __future__ import annotations

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql.bindables import change_webhook, cron_webhook
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_common.graphql_support import bad_input

Info = GraphQLResolveInfo[Context]
MAX_DAYS = 31


@cron_webhook.field("consecutiveFailures")
@change_webhook.field("consecutiveFailures")
async def resolve_webhook_consecutive_failures(webhook: GraphQLObject, info: Info) -> int:
    return await info.context.failures.load(webhook["id"])


@cron_webhook.field("stats")
@change_webhook.field("stats")
async def resolve_webhook_stats(webhook: GraphQLObject, info: Info) -> GraphQLObject:
    return await info.context.stats.load(webhook["id"])


@cron_webhook.field("dailyStats")
@change_webhook.field("dailyStats")
async def resolve_webhook_daily_stats(
    webhook: GraphQLObject, info: Info, days: int | None = 7
) -> list[GraphQLObject]:
    """Every day of the window in the webhook's time zone (UTC for change webhooks)."""
    if days is None or not 1 <= days <= MAX_DAYS:  # null is allowed by `Int = 7`
        raise bad_input("days", f"must be from 1 to {MAX_DAYS}")
    zone = webhook.get("timezone") or "UTC"
    return await info.context.daily_stats.load((webhook["id"], zone, days))
