"""GraphQL resolvers: queries read projection tables; mutations call commands.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, TypeVar

from graphql import GraphQLError, GraphQLResolveInfo

from cronhooks_admin.commands import NotFound
from cronhooks_admin.context import Context
from cronhooks_admin.validation import InputError
from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.eventstore import ConcurrencyError
from cronhooks_common.globs import like_prefix

T = TypeVar("T")
Info = GraphQLResolveInfo[Context]
MAX_LIMIT = 500
MAX_NEXT_RUNS = 100


def bad_input(field: str, reason: str) -> GraphQLError:
    return GraphQLError(f"{field}: {reason}", extensions={"code": "BAD_USER_INPUT", "field": field})


def not_found(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "NOT_FOUND"})


async def _command(run: Callable[[], Awaitable[T]]) -> T:
    """Run a command, mapping domain errors to GraphQL errors; retry lost races."""
    for _ in range(5):
        try:
            return await run()
        except InputError as exc:
            raise bad_input(exc.field, exc.reason) from None
        except NotFound as exc:
            raise not_found(str(exc)) from None
        except ConcurrencyError:
            continue  # another command changed the webhook meanwhile: decide again
    raise GraphQLError(
        "the webhook is being changed concurrently; try again", extensions={"code": "CONFLICT"}
    )


async def _webhook_row(ctx: Context, webhook_id: int) -> dict[str, Any]:
    row = await ctx.pool.fetchrow("select * from admin.webhooks where id = $1", webhook_id)
    if row is None:
        raise not_found(f"webhook {webhook_id} not found")
    return dict(row)


# --- queries -------------------------------------------------------------------------


async def cron_webhooks(_: Any, info: Info) -> list[dict[str, Any]]:
    ctx = info.context
    rows = await ctx.pool.fetch(
        "select * from admin.webhooks where disabled_at is null order by created_at, id"
    )
    return [dict(r) for r in rows]


async def cron_webhook(_: Any, info: Info, id: int) -> dict[str, Any] | None:
    ctx = info.context
    row = await ctx.pool.fetchrow("select * from admin.webhooks where id = $1", id)
    return None if row is None else dict(row)


async def cron_webhook_deliveries(
    _: Any, info: Info, cron_webhook_id: int, limit: int = 50
) -> list[dict[str, Any]]:
    ctx = info.context
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    rows = await ctx.pool.fetch(
        "select * from admin.deliveries where cron_webhook_id = $1"
        " order by created_at desc, id desc limit $2",
        cron_webhook_id,
        limit,
    )
    return [dict(r) for r in rows]


async def cron_webhook_delivery(_: Any, info: Info, id: int) -> dict[str, Any] | None:
    ctx = info.context
    row = await ctx.pool.fetchrow("select * from admin.deliveries where id = $1", id)
    return None if row is None else dict(row)


async def resolve_cron_webhook_next_runs(
    webhook: dict[str, Any], info: Info, count: int = 5
) -> list[datetime]:
    ctx = info.context
    if not 0 <= count <= MAX_NEXT_RUNS:
        raise bad_input("count", f"must be from 0 to {MAX_NEXT_RUNS}")
    if not webhook["enabled"] or webhook["disabled_at"] is not None:
        return []
    try:
        schedule = CronSchedule.parse(webhook["cron_schedule"], webhook["timezone"])
    except CronError:
        return []
    return schedule.upcoming(ctx.clock.now(), count)


async def resolve_cron_webhook_consecutive_failures(webhook: dict[str, Any], info: Info) -> int:
    return await info.context.failures.load(webhook["id"])


async def resolve_cron_webhook_stats(webhook: dict[str, Any], info: Info) -> dict[str, Any]:
    return await info.context.stats.load(webhook["id"])


async def resolve_delivery_attempts(delivery: dict[str, Any], info: Info) -> list[dict[str, Any]]:
    ctx = info.context
    return await ctx.attempts.load(delivery["id"])


def _check_glob(field: str, value: str) -> None:
    if "\x00" in value or any(ord(c) < 0x20 for c in value) or len(value.encode()) > 512:
        raise bad_input(field, "must be at most 512 bytes, without NUL or control characters")


async def note(_: Any, info: Info, path: str) -> dict[str, Any] | None:
    _check_glob("path", path)
    row = await info.context.pool.fetchrow("select * from admin.notes where path = $1", path)
    return None if row is None else dict(row)


async def notes(_: Any, info: Info, pattern: str = "*", limit: int = 100) -> list[dict[str, Any]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    _check_glob("pattern", pattern)
    rows = await info.context.pool.fetch(
        "select * from admin.notes where path like $1 order by path", like_prefix(pattern)
    )
    return [dict(r) for r in rows if fnmatchcase(r["path"], pattern)][:limit]


async def agents(_: Any, info: Info) -> list[dict[str, Any]]:
    rows = await info.context.pool.fetch(
        "select * from admin.agents where deleted_at is null order by id"
    )
    return [dict(r) for r in rows]


async def agent_triggers(_: Any, info: Info, agent_id: int) -> list[dict[str, Any]]:
    rows = await info.context.pool.fetch(
        "select * from admin.agent_jobs where agent_id = $1 order by fire_at, job_id", agent_id
    )
    return [{**dict(r), "schedule_id": str(r["schedule_id"])} for r in rows]


async def _agent_row(info: Info, agent_id: int) -> dict[str, Any]:
    row = await info.context.pool.fetchrow("select * from admin.agents where id = $1", agent_id)
    if row is None:
        raise not_found(f"agent {agent_id} not found")
    return dict(row)


async def create_agent(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    ctx = info.context
    agent_id, token = await _command(lambda: ctx.agents.create(input, ctx.admin))
    return {"agent": await _agent_row(info, agent_id), "access_token": token}


async def rotate_agent_token(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    token = await _command(lambda: ctx.agents.rotate_token(id, ctx.admin))
    return {"agent": await _agent_row(info, id), "access_token": token}


async def delete_agent(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    return {"id": await _command(lambda: ctx.agents.delete(id, ctx.admin))}


# --- mutations -----------------------------------------------------------------------


async def create_cron_webhook(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    ctx = info.context
    webhook_id, secret = await _command(lambda: ctx.commands.create_webhook(input, ctx.admin))
    return {"cron_webhook": await _webhook_row(ctx, webhook_id), "secret": secret}


async def update_cron_webhook(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    ctx = info.context
    webhook_id = await _command(lambda: ctx.commands.update_webhook(input, ctx.admin))
    return {"cron_webhook": await _webhook_row(ctx, webhook_id)}


async def delete_cron_webhook(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    return {"id": await _command(lambda: ctx.commands.delete_webhook(id, ctx.admin))}


async def regenerate_cron_webhook_secret(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    secret = await _command(lambda: ctx.commands.regenerate_secret(id, ctx.admin))
    return {"cron_webhook": await _webhook_row(ctx, id), "secret": secret}


async def trigger_cron_webhook(_: Any, info: Info, webhook_id: int) -> dict[str, Any]:
    ctx = info.context
    delivery_id = await _command(lambda: ctx.commands.trigger_webhook(webhook_id, ctx.admin))
    return {"delivery_id": delivery_id}
