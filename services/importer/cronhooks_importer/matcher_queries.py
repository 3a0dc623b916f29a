"""The change matcher's SQL (change_matcher.py, change_step.py), re-exported by queries.py:
`importer.change_webhooks` (its copy of the change webhooks), `importer.change_requests`
(its claims, one per webhook and batch) and `importer.change_matcher_checkpoint`.

Functions run inside the caller's transaction and take and return plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from cronhooks_common.tail import Checkpoint

# --- the change matcher ------------------------------------------------------------------


async def try_lock_matcher(conn: asyncpg.Connection, lock: int) -> bool:
    """The matcher's advisory lock for this transaction, if no other replica holds it."""
    return bool(await conn.fetchval("select pg_try_advisory_xact_lock($1)", lock))


async def matcher_checkpoint(conn: asyncpg.Connection) -> Checkpoint:
    row = await conn.fetchrow("select txid, position from importer.change_matcher_checkpoint")
    return Checkpoint(row["txid"], row["position"])


async def move_matcher_checkpoint(conn: asyncpg.Connection, to: Checkpoint) -> None:
    await conn.execute(
        "update importer.change_matcher_checkpoint set txid = $1, position = $2",
        to.txid,
        to.position,
    )


async def change_webhook_configs(conn: asyncpg.Connection) -> list[tuple[int, Any]]:
    """(webhook id, configuration as its events carried it) of every kept change webhook."""
    rows = await conn.fetch("select webhook_id, config from importer.change_webhooks")
    return [(r["webhook_id"], r["config"]) for r in rows]


async def change_webhook_config(conn: asyncpg.Connection, webhook_id: int) -> Any:
    """The kept configuration of one change webhook (None if it has none)."""
    return await conn.fetchval(
        "select config from importer.change_webhooks where webhook_id = $1", webhook_id
    )


async def keep_change_webhook(conn: asyncpg.Connection, webhook_id: int, config: Any) -> None:
    await conn.execute(
        """
        insert into importer.change_webhooks (webhook_id, config) values ($1, $2)
        on conflict (webhook_id) do update set config = excluded.config
        """,
        webhook_id,
        config,
    )


async def forget_change_webhook(conn: asyncpg.Connection, webhook_id: int) -> None:
    await conn.execute("delete from importer.change_webhooks where webhook_id = $1", webhook_id)


async def claim_change_requests(
    conn: asyncpg.Connection,
    claims: Sequence[tuple[int, str, datetime]],
    *,
    now: datetime,
) -> dict[tuple[int, str], int]:
    """Claim each (webhook id, batch id, batch time) in one statement, with a new delivery
    id; returns (webhook id, batch id) → delivery id for the claims won. One lost was
    claimed before (a replay, another replica): the primary key never grants it twice."""
    rows = await conn.fetch(
        """
        insert into importer.change_requests
            (webhook_id, batch_id, batch_at, delivery_id, requested_at)
        select w, b, t, nextval('eventstore.delivery_ids'), $3
        from unnest($1::bigint[], $2::uuid[], $4::timestamptz[]) as x(w, b, t)
        on conflict (webhook_id, batch_id, batch_at) do nothing
        returning webhook_id, batch_id::text as batch_id, delivery_id
        """,
        [webhook_id for webhook_id, _, _ in claims],
        [batch_id for _, batch_id, _ in claims],
        now,
        [batch_at for _, _, batch_at in claims],
    )
    return {(r["webhook_id"], r["batch_id"]): r["delivery_id"] for r in rows}


# --- importer.chain_counts ---------------------------------------------------------------


async def count_chain_deliveries(
    conn: asyncpg.Connection, added: Sequence[tuple[str, int]], *, now: datetime
) -> dict[str, int]:
    """Add (trace, new deliveries) to each chain's count and return the counts after. A
    chain first seen starts at 1: its root, requested where the matcher does not look (a
    cron slot, a trigger, an admin's write). The row lock orders concurrent callers."""
    rows = await conn.fetch(
        """
        insert into importer.chain_counts (trace, deliveries, last_at)
        select t, 1 + n, $3 from unnest($1::text[], $2::int[]) as x(t, n)
        on conflict (trace) do update
            set deliveries = importer.chain_counts.deliveries + excluded.deliveries - 1,
                last_at = excluded.last_at
        returning trace, deliveries
        """,
        [trace for trace, _ in added],
        [n for _, n in added],
        now,
    )
    return {r["trace"]: r["deliveries"] for r in rows}


async def forget_idle_chains(conn: asyncpg.Connection, before: datetime) -> int:
    """Drop the counts of chains that requested nothing since `before`."""
    status = await conn.execute("delete from importer.chain_counts where last_at < $1", before)
    return int(status.split()[-1])


async def next_alert_id(conn: asyncpg.Connection) -> int:
    """An alert id from the dispatcher's sequence: one id space for every alert."""
    return int(await conn.fetchval("select nextval('dispatcher.alert_ids')"))


async def queue_alert_post(
    conn: asyncpg.Connection, event_id: object, alert_id: int, now: datetime
) -> None:
    """A row for the dispatcher's alert sink (alert_sink.py), as alerts.py writes one."""
    await conn.execute(
        "insert into dispatcher.alert_posts (event_id, alert_id, due_at) values ($1, $2, $3)",
        event_id,
        alert_id,
        now,
    )
