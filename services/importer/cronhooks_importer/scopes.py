"""Tokens follow the state (CONTRACT §15): an api_token is honoured only while its webhook
exists and is enabled, and reads and writes only what both the token's and the webhook's
*current* patterns allow (and no deeper than its current maxDepth).

The webhook's state comes from its own event stream (the truth), folded once per version
and cached. Every request first asks the stream's current version (one index lookup on
the store's primary key) and folds again only when it moved. That is exact at once: a
change committed before the request is seen by it. (Hearing changes by NOTIFY instead
left a window, however short, in which a request could still be judged by the state
before a committed pause: the listener had not run yet.)
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from cronhooks_common import eventstore
from cronhooks_common.events import webhook_stream
from cronhooks_common.webhooks import load_webhook

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
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._cache: dict[int, tuple[int, Scope]] = {}  # webhook id → (stream version, scope)

    async def of(self, webhook_id: int) -> Scope:
        version = await eventstore.stream_version(self._pool, webhook_stream(webhook_id))
        if version == 0:
            return GONE  # never existed
        cached = self._cache.get(webhook_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        state = await load_webhook(self._pool, webhook_id)
        if state is None or not state.live:
            scope = GONE
        else:
            c = state.config
            scope = Scope(
                live=True,
                read_patterns=tuple(c.get("read_patterns") or ()),
                write_patterns=tuple(c.get("write_patterns") or ()),
                max_depth=int(c.get("max_depth", 1)),
            )
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()  # bounded memory: start over
        # Under the version the fold saw (it may be newer than the one asked above; then
        # the next request finds the versions differ and folds again: never stale).
        self._cache[webhook_id] = (state.version if state is not None else version, scope)
        return scope
