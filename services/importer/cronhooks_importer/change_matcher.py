"""Step 3, change webhooks (CONTRACT §11): every committed note batch requests one
delivery per change webhook it fires.

The matcher tails the event store in commit order (cronhooks_common.tail) and reads the
`webhook.*` events of change webhooks and the `note.changed` events together, as they
were committed: a batch is judged against the change webhooks as they stood when it
committed, and a replay judges it the same way. Each step is one transaction: its events,
handled by change_step.py (the change webhooks it learnt about go to
`importer.change_webhooks`, its own copy; a row per (webhook, batch) it fires to
`importer.change_requests`, unique: a crash or a second replica can never request a
second delivery; the `delivery.requested` events), and the checkpoint. One replica
matches at a time (an advisory lock, as admin-api's projector).

A batch's `note.changed` events share one transaction, so they are read together; a step
that stops at its size limit in the middle of a transaction reads that transaction's rest
before matching.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import msgspec
import structlog

from cronhooks_common.clock import Clock
from cronhooks_common.events import WebhookConfig
from cronhooks_common.tail import (
    KEPT_EVENTS,
    Checkpoint,
    TailLoop,
    held_back,
    read_rest_of,
    scan_after,
)
from cronhooks_importer import queries
from cronhooks_importer.chain_limit import DEFAULT, ChainPolicy
from cronhooks_importer.change_index import ChangeIndex
from cronhooks_importer.change_step import MATCHING, match_events

log = structlog.get_logger(__name__)

MATCHER_LOCK = 0x63726F6E_6D617463  # "cronmatc"
PRUNE_EVERY = timedelta(hours=1)
TYPES = MATCHING.routing_keys  # the change webhooks' webhook.* events and note.changed


class ChangeMatcher:
    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        clock: Clock,
        *,
        batch_size: int = 1000,
        poll_seconds: float = 1.0,
        chains: ChainPolicy = DEFAULT,
    ) -> None:
        self._pool = pool
        self._chains = chains
        self._pruned_at: datetime | None = None
        self._clock = clock
        self._batch_size = batch_size
        self._loop = TailLoop(
            self.step,
            dsn,
            name="change-matcher",
            poll_seconds=poll_seconds,
            full=batch_size,
            unavailable="change_matcher_database_unavailable",
        )
        # The index as of `_index_at`; None: load it from importer.change_webhooks.
        self._index: ChangeIndex | None = None
        self._index_at: Checkpoint | None = None

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def step(self) -> tuple[int, bool]:
        """Match one batch of committed events; (events scanned, whether committed events
        wait behind an older transaction still running)."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                if not await queries.try_lock_matcher(conn, MATCHER_LOCK):
                    return 0, False  # another replica matches
                after = await queries.matcher_checkpoint(conn)
                index = await self._index_for(conn, after)
                # Webhooks and notes are streams kept forever: only their partition is read.
                events, last, scanned = await scan_after(
                    conn, after, self._batch_size, types=TYPES, table=KEPT_EVENTS
                )
                if scanned == self._batch_size:
                    rest, last = await read_rest_of(conn, last, types=TYPES, table=KEPT_EVENTS)
                    events += rest
                if events:
                    await match_events(conn, index, events, self._clock, self._chains)
                await self._forget_idle_chains(conn)
                if last != after:
                    await queries.move_matcher_checkpoint(conn, last)
                waiting = await held_back(conn, last, table=KEPT_EVENTS)
        except BaseException:
            self._index = None  # its changes may not have committed: load it again
            raise
        self._index_at = last
        return scanned, waiting

    async def _forget_idle_chains(self, conn: asyncpg.Connection) -> None:
        """Drop the counts of chains idle past `keep`, at most once an hour: a chain whose
        deliveries have left the history can ask for nothing more, and the table stays
        small."""
        now = self._clock.now()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        dropped = await queries.forget_idle_chains(conn, now - self._chains.keep)
        if dropped:
            log.info("idle_chains_forgotten", chains=dropped)

    async def _index_for(self, conn: asyncpg.Connection, at: Checkpoint) -> ChangeIndex:
        """The index as of checkpoint `at` (another replica may have moved it since)."""
        if self._index is None or self._index_at != at:
            index = ChangeIndex()
            for webhook_id, config in await queries.change_webhook_configs(conn):
                index.put(webhook_id, msgspec.convert(config, WebhookConfig))
            self._index = index
            log.info("change_webhooks_loaded", live=len(index))
        return self._index
