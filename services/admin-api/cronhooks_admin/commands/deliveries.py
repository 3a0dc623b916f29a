"""Deliveries an admin asks for outside the schedule (CONTRACT §10-§12): Run now
(triggerCronWebhook, /debug/run_cron_job), triggerChangeWebhook, replayDeliveries. Each
is a `delivery.requested` of trigger `manual` (manual.py) on a new delivery stream; none
while deliveries are paused (PAUSED, CONTRACT §16.4)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import change_notes, daily_budget, replay
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.change_notes import Wanted
from cronhooks_admin.commands.manual import manual_request
from cronhooks_admin.commands.pause import refuse_if_paused
from cronhooks_admin.commands.store import live_webhook, record, record_new_streams
from cronhooks_admin.commands.validation import check_trigger_paths
from cronhooks_admin.errors import InputError
from cronhooks_common.clock import Clock
from cronhooks_common.events import CHANGE, CRON, delivery_stream


@dataclass(frozen=True, slots=True)
class DeliveryCommands:
    pool: asyncpg.Pool
    clock: Clock

    async def trigger_webhook(self, webhook_id: int, admin: Admin) -> int:
        """Request a delivery now, outside the schedule; `nextRunAt` does not move."""
        async with self.pool.acquire() as conn, conn.transaction():
            await refuse_if_paused(conn, self.clock.now())
            state = await live_webhook(conn, webhook_id, CRON)
            delivery_id: int = await conn.fetchval(sql.NEXT_DELIVERY_ID)
            request = manual_request(state, webhook_id, delivery_id)
            now = self.clock.now()
            await daily_budget.count_manual(conn, state, webhook_id, 1, now)
            await record(
                conn, delivery_stream(delivery_id), 0, [request], actor=admin.actor, now=now
            )
        return delivery_id

    async def trigger_change_webhook(self, webhook_id: int, paths: list[str], admin: Admin) -> int:
        """A manual delivery of these notes (as they are now) as `update` changes at depth
        0 (CONTRACT §11), whatever the webhook's filters say: the admin chose them."""
        wanted = check_trigger_paths(paths)
        async with self.pool.acquire() as conn, conn.transaction():
            await refuse_if_paused(conn, self.clock.now())
            state = await live_webhook(conn, webhook_id, CHANGE)
            changes = [Wanted(path, "update") for path in wanted]
            [notes] = await change_notes.notes_now(conn, state.config, [changes])
            missing = [p for p in wanted if p not in notes or notes[p]["removed"]]
            if missing:
                raise InputError("paths", f"no note at {missing[0]!r}")
            # readPatterns, includeContent and the 1 MiB cap, as for the matcher's deliveries
            payload = change_notes.payload_now(state.config, changes, notes)
            delivery_id: int = await conn.fetchval(sql.NEXT_DELIVERY_ID)
            request = manual_request(state, webhook_id, delivery_id, depth=0, payload=payload)
            await record(
                conn,
                delivery_stream(delivery_id),
                0,
                [request],
                actor=admin.actor,
                now=self.clock.now(),
            )
        return delivery_id

    async def replay_deliveries(
        self, webhook_id: int, since: datetime, until: datetime | None, admin: Admin
    ) -> list[int]:
        """A new MANUAL delivery for each failed delivery of the webhook (either kind)
        created in [since, until), oldest first (replay.py); their ids, in that order.
        All in one transaction, with one statement for the ids and one for the events;
        the webhook as it is now decides where and what they send."""
        replay.check_window(since, until)
        async with self.pool.acquire() as conn, conn.transaction():
            await refuse_if_paused(conn, self.clock.now())
            await replay.take_turn(conn, webhook_id)
            state = await live_webhook(conn, webhook_id, None)
            failed = await replay.failed_deliveries(conn, webhook_id, since, until)
            if not failed:
                return []
            rows = await conn.fetch(sql.NEXT_DELIVERY_IDS, len(failed))
            ids: list[int] = sorted(r["id"] for r in rows)
            requests = await replay.replay_requests(conn, state, webhook_id, ids, failed)
            now = self.clock.now()
            await daily_budget.count_manual(conn, state, webhook_id, len(requests), now)
            streams = [delivery_stream(new_id) for new_id in ids]
            await record_new_streams(conn, streams, requests, actor=admin.actor, now=now)
        return ids
