"""GraphQL resolvers: queries read projection tables; mutations call commands.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from graphql import GraphQLError, GraphQLResolveInfo

from cronhooks_admin import note_reads
from cronhooks_admin.commands import Conflict, NotFound
from cronhooks_admin.context import NEXT_RUNS, Context
from cronhooks_admin.validation import InputError
from cronhooks_common.cron import CronError, CronSchedule
from cronhooks_common.events import CHANGE, CRON
from cronhooks_common.eventstore import ConcurrencyError
from cronhooks_common.globs import glob_to_regex, like_prefix, pattern_problem
from cronhooks_common.graphql_support import bad_input
from cronhooks_common.paths import path_problem

T = TypeVar("T")
Info = GraphQLResolveInfo[Context]
MAX_LIMIT = 500
MAX_NEXT_RUNS = NEXT_RUNS.maximum


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
        except Conflict as exc:
            raise GraphQLError(str(exc), extensions={"code": "CONFLICT"}) from None
        except ConcurrencyError:
            continue  # another command changed the webhook meanwhile: decide again
    raise GraphQLError(
        "the webhook is being changed concurrently; try again", extensions={"code": "CONFLICT"}
    )


async def _webhook_row(ctx: Context, webhook_id: int, kind: str = CRON) -> dict[str, Any]:
    """The live webhook's row, or NOT_FOUND (a deleted webhook, or one of the other kind,
    is unknown)."""
    row = await ctx.pool.fetchrow(
        "select * from admin.webhooks where id = $1 and kind = $2 and disabled_at is null",
        webhook_id,
        kind,
    )
    if row is None:
        raise not_found(f"webhook {webhook_id} not found")
    return dict(row)


# --- queries -------------------------------------------------------------------------


async def cron_webhooks(_: Any, info: Info) -> list[dict[str, Any]]:
    ctx = info.context
    rows = await ctx.pool.fetch(
        "select * from admin.webhooks where kind = 'cron' and disabled_at is null"
        " order by created_at, id"
    )
    return [dict(r) for r in rows]


async def cron_webhook(_: Any, info: Info, id: int) -> dict[str, Any] | None:
    """A deleted webhook is unknown: null, like an id never used."""
    ctx = info.context
    row = await ctx.pool.fetchrow(
        "select * from admin.webhooks where id = $1 and kind = 'cron' and disabled_at is null",
        id,
    )
    return None if row is None else dict(row)


async def cron_webhook_deliveries(
    _: Any, info: Info, cron_webhook_id: int, limit: int = 50
) -> list[dict[str, Any]]:
    return await _deliveries(info.context, cron_webhook_id, limit, CRON)


async def _deliveries(ctx: Context, webhook_id: int, limit: int, kind: str) -> list[dict[str, Any]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    await _webhook_row(ctx, webhook_id, kind)  # NOT_FOUND when unknown or deleted
    rows = await ctx.pool.fetch(
        "select * from admin.deliveries where cron_webhook_id = $1"
        " order by created_at desc, id desc limit $2",
        webhook_id,
        limit,
    )
    return [dict(r) for r in rows]


# --- change webhooks (CONTRACT §11) ------------------------------------------------------


async def change_webhooks(_: Any, info: Info) -> list[dict[str, Any]]:
    rows = await info.context.pool.fetch(
        "select * from admin.webhooks where kind = 'change' and disabled_at is null"
        " order by created_at, id"
    )
    return [dict(r) for r in rows]


async def change_webhook(_: Any, info: Info, id: int) -> dict[str, Any] | None:
    row = await info.context.pool.fetchrow(
        "select * from admin.webhooks where id = $1 and kind = 'change' and disabled_at is null",
        id,
    )
    return None if row is None else dict(row)


async def change_webhook_deliveries(
    _: Any, info: Info, change_webhook_id: int, limit: int = 50
) -> list[dict[str, Any]]:
    return await _deliveries(info.context, change_webhook_id, limit, CHANGE)


async def create_change_webhook(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    ctx = info.context
    webhook_id, secret = await _command(
        lambda: ctx.commands.create_webhook(input, ctx.admin, CHANGE)
    )
    return {"change_webhook": await _webhook_row(ctx, webhook_id, CHANGE), "secret": secret}


async def update_change_webhook(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    ctx = info.context
    webhook_id = await _command(lambda: ctx.commands.update_webhook(input, ctx.admin, CHANGE))
    return {"change_webhook": await _webhook_row(ctx, webhook_id, CHANGE)}


async def delete_change_webhook(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    return {"id": await _command(lambda: ctx.commands.delete_webhook(id, ctx.admin, CHANGE))}


async def regenerate_change_webhook_secret(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    secret = await _command(lambda: ctx.commands.regenerate_secret(id, ctx.admin, CHANGE))
    return {"change_webhook": await _webhook_row(ctx, id, CHANGE), "secret": secret}


async def trigger_change_webhook(_: Any, info: Info, id: int, paths: list[str]) -> dict[str, Any]:
    ctx = info.context
    delivery_id = await _command(lambda: ctx.commands.trigger_change_webhook(id, paths, ctx.admin))
    return {"delivery_id": delivery_id}


async def cron_webhook_delivery(_: Any, info: Info, id: int) -> dict[str, Any] | None:
    """Null when unknown, or when its webhook was deleted."""
    ctx = info.context
    row = await ctx.pool.fetchrow(
        """
        select d.* from admin.deliveries d join admin.webhooks w on w.id = d.cron_webhook_id
        where d.id = $1 and w.disabled_at is null
        """,
        id,
    )
    return None if row is None else dict(row)


async def resolve_cron_webhook_next_runs(
    webhook: dict[str, Any], info: Info, count: int | None = NEXT_RUNS.default
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


async def resolve_cron_webhook_consecutive_failures(webhook: dict[str, Any], info: Info) -> int:
    return await info.context.failures.load(webhook["id"])


async def resolve_cron_webhook_stats(webhook: dict[str, Any], info: Info) -> dict[str, Any]:
    return await info.context.stats.load(webhook["id"])


async def resolve_delivery_attempts(delivery: dict[str, Any], info: Info) -> list[dict[str, Any]]:
    ctx = info.context
    return await ctx.attempts.load(delivery["id"])


async def note(_: Any, info: Info, path: str) -> dict[str, Any] | None:
    problem = path_problem(path)
    if problem is not None:
        raise bad_input("path", problem)
    await note_reads.charge(info, note_reads.of_path(path))
    row = await info.context.pool.fetchrow(
        "select * from admin.notes where path = $1 and not removed", path
    )
    return None if row is None else dict(row)


async def notes(_: Any, info: Info, pattern: str = "*", limit: int = 100) -> list[dict[str, Any]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise bad_input("limit", f"must be from 1 to {MAX_LIMIT}")
    problem = pattern_problem(pattern)
    if problem is not None:
        raise bad_input("pattern", problem)
    # 16 MiB of content per request in all (CONTRACT §15), decided before any is read.
    await note_reads.charge(info, note_reads.of_pattern(pattern, limit))
    # The prefix narrows by index, the glob (as a regex) filters in SQL.
    rows = await info.context.pool.fetch(
        "select * from admin.notes where path like $1 and path ~ $2 and not removed"
        " order by path limit $3",
        like_prefix(pattern),
        glob_to_regex(pattern),
        limit,
    )
    return [dict(r) for r in rows]


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


async def api_keys(_: Any, info: Info) -> list[dict[str, Any]]:
    return [dict(row) for row in await info.context.api_keys.list()]


async def create_api_key(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    ctx = info.context
    row, key = await _command(lambda: ctx.api_keys.create(input, ctx.admin))
    return {"api_key": dict(row), "key": key}


async def revoke_api_key(_: Any, info: Info, id: int) -> dict[str, Any]:
    ctx = info.context
    return {"api_key": dict(await _command(lambda: ctx.api_keys.revoke(id, ctx.admin)))}


async def push_notes(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    return await info.context.note_writes.push(info.context.admin, input)


async def commit_notes(_: Any, info: Info) -> dict[str, Any]:
    return await info.context.note_writes.commit(info.context.admin)


async def hide_notes(_: Any, info: Info, input: dict[str, Any]) -> dict[str, Any]:
    return await info.context.note_writes.hide(info.context.admin, input)


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


async def replay_deliveries(
    _: Any, info: Info, webhook_id: int, since: datetime, until: datetime | None = None
) -> dict[str, Any]:
    ctx = info.context
    ids = await _command(
        lambda: ctx.commands.replay_deliveries(webhook_id, since, until, ctx.admin)
    )
    return {"delivery_ids": ids}


def resolve_queued_ms(delivery: dict[str, Any], *_: Any) -> int | None:
    """CronWebhookDelivery.queuedMs: the wait for the webhook (DELAY) or its execution group
    before the first attempt; 0 if it never waited, null while it still waits."""
    if delivery.get("queued_ms") is not None:
        return int(delivery["queued_ms"])
    since = delivery.get("queued_since")
    if since is None:
        return 0
    ended = delivery.get("completed_at")  # skipped while waiting (its webhook was deleted)
    return None if ended is None else max(int((ended - since).total_seconds() * 1000), 0)
