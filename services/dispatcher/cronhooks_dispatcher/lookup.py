"""Before each POST the dispatcher asks: was this request handled before (inbox), and what
is the webhook's sealed secret (none for a one-shot fire)? A herd arrives as a burst of
messages; asking once per message costs a database round trip each, about as much CPU as
the POST itself. The loader gathers the questions of one event-loop iteration into one
query."""

from __future__ import annotations

from typing import NamedTuple
from uuid import UUID

import asyncpg
from aiodataloader import DataLoader


class Lookup(NamedTuple):
    handled: bool  # the inbox holds the request's event id: its outcome is recorded
    sealed_secret: bytes | None  # None: the webhook has no secret (deleted meanwhile)


class LookupKey(NamedTuple):
    event_id: UUID
    webhook_id: int | None = None  # None: only the inbox question (a one-shot fire)


_SQL = """
select k.i,
       exists (select 1 from dispatcher.inbox i where i.event_id = k.event_id) as handled,
       (select s.ciphertext from shared.webhook_secrets s where s.webhook_id = k.webhook_id)
           as sealed_secret
from unnest($1::uuid[], $2::bigint[]) with ordinality as k(event_id, webhook_id, i)
"""


class DeliveryLookups(DataLoader[LookupKey, Lookup]):
    def __init__(self, pool: asyncpg.Pool) -> None:
        # No cache: an answer is only true at the moment it is read.
        super().__init__(cache=False, max_batch_size=1000)
        self._pool = pool

    async def batch_load_fn(self, keys: list[LookupKey]) -> list[Lookup]:
        rows = await self._pool.fetch(
            _SQL, [k.event_id for k in keys], [k.webhook_id for k in keys]
        )
        by_index = {r["i"]: Lookup(r["handled"], r["sealed_secret"]) for r in rows}
        return [by_index[i] for i in range(1, len(keys) + 1)]
