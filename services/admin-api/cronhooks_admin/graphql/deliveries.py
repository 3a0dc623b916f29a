"""Deliveries (CONTRACT §10-§12): a webhook's list and one delivery, with their attempts;
the deliveries an admin asks for (Run now, triggerChangeWebhook, replayDeliveries: the
command side's deliveries.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql import queries as sql
from cronhooks_admin.graphql.bindables import (
    cron_webhook_delivery,
    delivery_attempt,
    mutation,
    query,
)
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.errors import run_command
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_admin.graphql.webhooks import live_webhook_row
from cronhooks_common.events import CHANGE, CRON
from cronhooks_common.graphql_support import bad_input

Info = GraphQLResolveInfo[Context]
MAX_LIMIT = 500
MAX_CHAIN = 1000  # deliveries of one trace listed (CONTRACT §16.3)


async def _deliveries(ctx: Context, webhook_id: int, limit: int, kind: str) -> list[GraphQLObject]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    await live_webhook_row(ctx, webhook_id, kind)  # NOT_FOUND when unknown or deleted
    return [dict(r) for r in await ctx.pool.fetch(sql.DELIVERIES, webhook_id, limit)]


@query.field("cronWebhookDeliveries")
async def resolve_cron_webhook_deliveries(
    _: Any, info: Info, cron_webhook_id: int, limit: int = 50
) -> list[GraphQLObject]:
    return await _deliveries(info.context, cron_webhook_id, limit, CRON)


@query.field("changeWebhookDeliveries")
async def resolve_change_webhook_deliveries(
    _: Any, info: Info, change_webhook_id: int, limit: int = 50
) -> list[GraphQLObject]:
    return await _deliveries(info.context, change_webhook_id, limit, CHANGE)


@query.field("cronWebhookDelivery")
async def resolve_cron_webhook_delivery(_: Any, info: Info, id: int) -> GraphQLObject | None:
    """Null when unknown, or when its webhook was deleted."""
    row = await info.context.pool.fetchrow(sql.DELIVERY, id)
    return None if row is None else dict(row)


@query.field("deliveryChain")
async def resolve_delivery_chain(_: Any, info: Info, trace: str) -> list[GraphQLObject]:
    """A chain's deliveries, the root first (CONTRACT §16.3); [] for an unknown trace."""
    rows = await info.context.pool.fetch(sql.DELIVERY_CHAIN, trace, MAX_CHAIN)
    return [dict(r) for r in rows]


@cron_webhook_delivery.field("attempts")
async def resolve_cron_webhook_delivery_attempts(
    delivery: GraphQLObject, info: Info
) -> list[GraphQLObject]:
    return await info.context.attempts.load(delivery["id"])


@cron_webhook_delivery.field("queuedMs")
def resolve_cron_webhook_delivery_queued_ms(delivery: GraphQLObject, *_: Any) -> int | None:
    """The wait for the webhook (DELAY) or its execution group before the first attempt;
    0 if it never waited, null while it still waits."""
    if delivery.get("queued_ms") is not None:
        return int(delivery["queued_ms"])
    since = delivery.get("queued_since")
    if since is None:
        return 0
    ended = delivery.get("completed_at")  # skipped while waiting (its webhook was deleted)
    return None if ended is None else max(int((ended - since).total_seconds() * 1000), 0)


@delivery_attempt.field("logsExpired")
def resolve_delivery_attempt_logs_expired(attempt: GraphQLObject, *_: Any) -> bool:
    """CONTRACT §12: true once retention dropped the attempt's bodies."""
    return bool(attempt.get("logs_expired"))


@mutation.field("triggerCronWebhook")
async def resolve_trigger_cron_webhook(_: Any, info: Info, webhook_id: int) -> GraphQLObject:
    ctx = info.context
    delivery_id = await run_command(
        lambda: ctx.commands.deliveries.trigger_webhook(webhook_id, ctx.admin)
    )
    return {"delivery_id": delivery_id}


@mutation.field("triggerChangeWebhook")
async def resolve_trigger_change_webhook(
    _: Any, info: Info, id: int, paths: list[str]
) -> GraphQLObject:
    ctx = info.context
    delivery_id = await run_command(
        lambda: ctx.commands.deliveries.trigger_change_webhook(id, paths, ctx.admin)
    )
    return {"delivery_id": delivery_id}


@mutation.field("replayDeliveries")
async def resolve_replay_deliveries(
    _: Any, info: Info, webhook_id: int, since: datetime, until: datetime | None = None
) -> GraphQLObject:
    ctx = info.context
    ids = await run_command(
        lambda: ctx.commands.deliveries.replay_deliveries(webhook_id, since, until, ctx.admin)
    )
    return {"delivery_ids": ids}
