"""Cron and change webhooks (CONTRACT §10, §11): their queries, their mutations (the
command side's webhooks.py), CronWebhook.nextRuns and scheduleDescription (§17). A deleted
webhook is unknown: null in a query, NOT_FOUND in a mutation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.commands.validation import WebhookInput
from cronhooks_admin.graphql import queries as sql
from cronhooks_admin.graphql.bindables import change_webhook, cron_webhook, mutation, query
from cronhooks_admin.graphql.context import NEXT_RUNS, Context
from cronhooks_admin.graphql.errors import not_found, run_command
from cronhooks_admin.graphql.shapes import GraphQLObject
from cronhooks_admin.schedule_words import describe
from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import CHANGE, CRON
from cronhooks_common.graphql_support import bad_input

Info = GraphQLResolveInfo[Context]
MAX_NEXT_RUNS = NEXT_RUNS.maximum


async def live_webhook_row(ctx: Context, webhook_id: int, kind: str) -> GraphQLObject:
    """The live webhook's row, or NOT_FOUND (a deleted webhook, or one of the other kind,
    is unknown)."""
    row = await ctx.pool.fetchrow(sql.WEBHOOK, webhook_id, kind)
    if row is None:
        raise not_found(f"webhook {webhook_id} not found")
    return dict(row)


async def _webhooks(ctx: Context, kind: str) -> list[GraphQLObject]:
    return [dict(r) for r in await ctx.pool.fetch(sql.WEBHOOKS, kind)]


async def _webhook(ctx: Context, webhook_id: int, kind: str) -> GraphQLObject | None:
    row = await ctx.pool.fetchrow(sql.WEBHOOK, webhook_id, kind)
    return None if row is None else dict(row)


# --- cron webhooks ------------------------------------------------------------------------


@query.field("cronWebhooks")
async def resolve_cron_webhooks(_: Any, info: Info) -> list[GraphQLObject]:
    return await _webhooks(info.context, CRON)


@query.field("cronWebhook")
async def resolve_cron_webhook(_: Any, info: Info, id: int) -> GraphQLObject | None:
    return await _webhook(info.context, id, CRON)


@mutation.field("createCronWebhook")
async def resolve_create_cron_webhook(_: Any, info: Info, input: WebhookInput) -> GraphQLObject:
    ctx = info.context
    webhook_id, secret = await run_command(lambda: ctx.commands.webhooks.create(input, ctx.admin))
    return {"cron_webhook": await live_webhook_row(ctx, webhook_id, CRON), "secret": secret}


@mutation.field("updateCronWebhook")
async def resolve_update_cron_webhook(_: Any, info: Info, input: WebhookInput) -> GraphQLObject:
    ctx = info.context
    webhook_id = await run_command(lambda: ctx.commands.webhooks.update(input, ctx.admin))
    return {"cron_webhook": await live_webhook_row(ctx, webhook_id, CRON)}


@mutation.field("deleteCronWebhook")
async def resolve_delete_cron_webhook(_: Any, info: Info, id: int) -> GraphQLObject:
    ctx = info.context
    return {"id": await run_command(lambda: ctx.commands.webhooks.delete(id, ctx.admin))}


@mutation.field("regenerateCronWebhookSecret")
async def resolve_regenerate_cron_webhook_secret(
    _: Any, info: Info, id: int, grace_seconds: int | None = 0
) -> GraphQLObject:
    ctx = info.context
    secret = await run_command(
        lambda: ctx.commands.webhooks.regenerate_secret(id, ctx.admin, CRON, grace_seconds)
    )
    return {"cron_webhook": await live_webhook_row(ctx, id, CRON), "secret": secret}


# --- signatures (CONTRACT §17), both kinds ------------------------------------------------


@cron_webhook.field("publicKey")
@change_webhook.field("publicKey")
def resolve_webhook_public_key(webhook: GraphQLObject, _: Info) -> str | None:
    """The Ed25519 public key while the webhook signs with it (a pair kept from an earlier
    ED25519 period is not shown)."""
    return webhook["public_key"] if webhook["signature_scheme"] == "ED25519" else None


@cron_webhook.field("previousSecretExpiresAt")
@change_webhook.field("previousSecretExpiresAt")
def resolve_webhook_previous_secret_expires_at(
    webhook: GraphQLObject, info: Info
) -> datetime | None:
    """Null once the clock has passed it: no previous secret is honoured any more."""
    expires: datetime | None = webhook["previous_secret_expires_at"]
    return expires if expires is not None and expires > info.context.clock.now() else None


@cron_webhook.field("nextRuns")
async def resolve_cron_webhook_next_runs(
    webhook: GraphQLObject, info: Info, count: int | None = NEXT_RUNS.default
) -> list[datetime]:
    ctx = info.context
    if count is None or not 0 <= count <= MAX_NEXT_RUNS:  # null is allowed by `Int = 5`
        raise bad_input("count", f"must be from 0 to {MAX_NEXT_RUNS}")
    if not webhook["enabled"] or webhook["disabled_at"] is not None:
        return []
    try:
        schedule = CronSchedule.parse(webhook["cron_schedule"], webhook["timezone"])
    except CronError:
        return []
    # A list of webhooks multiplies what the document asks for: the request's budget
    # (QUERY_TOO_COMPLEX past 10,000 values in all) is charged before computing.
    ctx.next_runs.charge(count)
    return schedule.upcoming(ctx.clock.now(), count)


@cron_webhook.field("scheduleDescription")
def resolve_cron_webhook_schedule_description(webhook: GraphQLObject, _: Info) -> str:
    # Computed from the projection's cron expression, not stored: a pure, memoised function
    # of it, so a better wording (a newer cron-descriptor) needs no migration or rebuild.
    return describe(webhook["cron_schedule"])


# --- change webhooks (CONTRACT §11) -------------------------------------------------------


@query.field("changeWebhooks")
async def resolve_change_webhooks(_: Any, info: Info) -> list[GraphQLObject]:
    return await _webhooks(info.context, CHANGE)


@query.field("changeWebhook")
async def resolve_change_webhook(_: Any, info: Info, id: int) -> GraphQLObject | None:
    return await _webhook(info.context, id, CHANGE)


@mutation.field("createChangeWebhook")
async def resolve_create_change_webhook(_: Any, info: Info, input: WebhookInput) -> GraphQLObject:
    ctx = info.context
    webhook_id, secret = await run_command(
        lambda: ctx.commands.webhooks.create(input, ctx.admin, CHANGE)
    )
    return {"change_webhook": await live_webhook_row(ctx, webhook_id, CHANGE), "secret": secret}


@mutation.field("updateChangeWebhook")
async def resolve_update_change_webhook(_: Any, info: Info, input: WebhookInput) -> GraphQLObject:
    ctx = info.context
    webhook_id = await run_command(lambda: ctx.commands.webhooks.update(input, ctx.admin, CHANGE))
    return {"change_webhook": await live_webhook_row(ctx, webhook_id, CHANGE)}


@mutation.field("deleteChangeWebhook")
async def resolve_delete_change_webhook(_: Any, info: Info, id: int) -> GraphQLObject:
    ctx = info.context
    return {"id": await run_command(lambda: ctx.commands.webhooks.delete(id, ctx.admin, CHANGE))}


@mutation.field("regenerateChangeWebhookSecret")
async def resolve_regenerate_change_webhook_secret(
    _: Any, info: Info, id: int, grace_seconds: int | None = 0
) -> GraphQLObject:
    ctx = info.context
    secret = await run_command(
        lambda: ctx.commands.webhooks.regenerate_secret(id, ctx.admin, CHANGE, grace_seconds)
    )
    return {"change_webhook": await live_webhook_row(ctx, id, CHANGE), "secret": secret}
