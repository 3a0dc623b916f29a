"""Tokens follow the state (CONTRACT §15): an api_token is honoured only while its webhook
exists and is enabled, and reads and writes only what both the token's and the webhook's
*current* patterns allow (and no deeper than its current maxDepth).

The webhook's state comes from its own event stream (the truth), folded once and cached
per webhook. Every webhook.* event, whichever service appends it, sends a NOTIFY with the
webhook id at its commit (a trigger on the event store); the listener evicts that entry.
If the listening connection is lost, the whole cache is dropped until it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import asyncpg
import structlog

from cronhooks_common import db
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.webhooks import load_webhook

log = structlog.get_logger(__name__)

CHANNEL = "cronhooks_webhooks"
MAX_CACHED = 100_000


@dataclass(frozen=True, slots=True)
class Scope:
    """What a webhook allows its tokens right now."""

    live: bool  # exists, not deleted, enabled
    read_patterns: tuple[str, ...]
    write_patterns: tuple[str, ...]
    max_depth: int


GONE = Scope(live=False, read_patterns=(), write_patterns=(), max_depth=0)


class WebhookScopes:
    def __init__(self, pool: asyncpg.Pool, dsn: str) -> None:
        self._pool = pool
        self._dsn = dsn
        self._cache: dict[int, Scope] = {}
        self._listening = False
        # Moves on every eviction: a state read while a change was being heard is not
        # cached (it may predate the change).
        self._generation = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def of(self, webhook_id: int) -> Scope:
        cached = self._cache.get(webhook_id)
        if cached is not None:
            return cached
        generation = self._generation
        scope = await self._load(webhook_id)
        # Cached only while changes are heard; a full cache starts over (bounded memory).
        if self._listening and generation == self._generation:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[webhook_id] = scope
        return scope

    async def _load(self, webhook_id: int) -> Scope:
        state = await load_webhook(self._pool, webhook_id)
        if state is None or not state.live:
            return GONE
        c = state.config
        return Scope(
            live=True,
            read_patterns=tuple(c.get("read_patterns") or ()),
            write_patterns=tuple(c.get("write_patterns") or ()),
            max_depth=int(c.get("max_depth", 1)),
        )

    def _evict(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self._generation += 1
        try:
            self._cache.pop(int(payload), None)
        except ValueError:
            self._cache.clear()

    async def _listen(self) -> None:
        while True:
            try:
                conn = await db.connect(self._dsn, name="importer-scopes")
            except TRANSIENT_DB_ERRORS:
                await asyncio.sleep(0.5)
                continue
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _, lost=lost: lost.set())
            try:
                await conn.add_listener(CHANNEL, self._evict)
                # Anything cached before we listened may be stale: start clean.
                self._cache.clear()
                self._listening = True
                await lost.wait()
            except TRANSIENT_DB_ERRORS:
                pass
            finally:
                self._listening = False
                self._generation += 1
                self._cache.clear()
                conn.terminate()
            log.warning("scope_listener_lost")
