"""Admin commands: validate → append events (+ own state) in one transaction → answer.

Every command projects its own events inline (projection.apply_batch), so the read
models reflect the command before the answer goes out; the live projector applies them
again later, which changes nothing (projections are idempotent).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from cronhooks_admin import change_notes, projection, replay
from cronhooks_admin.auth import Admin
from cronhooks_admin.manual import manual_request
from cronhooks_admin.validation import (
    InputError,
    camel,
    check_idempotency_key,
    check_schedule,
    check_secret,
    check_trigger_paths,
    normalize,
)
from cronhooks_common import budget, eventstore
from cronhooks_common.clock import Clock
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import (
    CHANGE,
    CRON,
    Causation,
    EventType,
    NewEvent,
    delivery_stream,
    webhook_stream,
)
from cronhooks_common.signing import generate_secret
from cronhooks_common.webhooks import WebhookState, config_fields, load_webhook

IDEMPOTENCY_WINDOW = timedelta(hours=24)


class Conflict(Exception):
    """The command cannot be answered as asked: the state moved on (GraphQL CONFLICT)."""


class NotFound(LookupError):
    def __init__(self, what: str, ident: int) -> None:
        super().__init__(f"{what} {ident} not found")


@dataclass(frozen=True, slots=True)
class Commands:
    pool: asyncpg.Pool
    clock: Clock
    secrets: SecretBox
    default_timezone: str
    allow_private: bool = False

    async def _append(
        self,
        conn: asyncpg.Connection,
        stream: str,
        expected_version: int,
        events: list[NewEvent],
        admin: Admin,
    ) -> None:
        recorded = await eventstore.append(
            conn,
            stream,
            events,
            expected_version=expected_version,
            causation=Causation.new(actor=admin.actor),
            occurred_at=self.clock.now(),
        )
        # Projected inline, so a query right after the mutation sees it; the live projector
        # applies the same events again later, which changes nothing.
        await projection.apply_batch(conn, recorded)

    async def create_webhook(
        self, fields: dict[str, Any], admin: Admin, kind: str = CRON
    ) -> tuple[int, str]:
        """Create a `kind` webhook; return (id, secret). An idempotency key seen before
        returns the webhook it created first."""
        key = check_idempotency_key(fields.get("idempotency_key"))
        config = normalize(fields, allow_private=self.allow_private, kind=kind)
        if kind == CRON:
            config.setdefault("timezone", self.default_timezone)
            config.setdefault("max_deliveries_per_day", None)  # omitted: no limit
            check_schedule(config)
        secret = check_secret(fields.get("secret")) or generate_secret()
        missing = [f for f in config_fields(kind) if f not in config]
        if missing:
            raise InputError(camel(missing[0]), "is required")
        async with self.pool.acquire() as conn, conn.transaction():
            webhook_id: int = await conn.fetchval("select nextval('eventstore.webhook_ids')")
            if key is not None:
                first = await self._claim_key(conn, key, webhook_id)
                if first is not None:
                    return first, await self._replayed_secret(conn, first, kind)
            await conn.execute(
                "insert into shared.webhook_secrets (webhook_id, ciphertext) values ($1, $2)",
                webhook_id,
                self.secrets.seal(secret),
            )
            data = {
                "webhook_id": webhook_id,
                "kind": kind,
                "config": config,
                "changed": list(config_fields(kind)),
            }
            await self._append(
                conn,
                webhook_stream(webhook_id),
                0,
                [NewEvent(EventType.WEBHOOK_CREATED, data)],
                admin,
            )
        return webhook_id, secret

    async def update_webhook(self, fields: dict[str, Any], admin: Admin, kind: str = CRON) -> int:
        webhook_id = int(fields["id"])
        changes = normalize(fields, allow_private=self.allow_private, kind=kind)
        new_secret = check_secret(fields.get("secret"))
        async with self.pool.acquire() as conn, conn.transaction():
            state = await self._live_webhook(conn, webhook_id, kind)
            config = state.config
            merged = {**config, **changes}
            if kind == CRON and changes.keys() & {"cron_schedule", "timezone"}:
                check_schedule(merged)
            # (.get: a field added later, e.g. executionGroup, is absent from older configs)
            changed = sorted(k for k in changes if changes[k] != config.get(k))
            events = []
            if changed:
                events.append(
                    NewEvent(
                        EventType.WEBHOOK_UPDATED,
                        {
                            "webhook_id": webhook_id,
                            "kind": state.kind,
                            "config": merged,
                            "changed": changed,
                        },
                    )
                )
            if kind == CRON and "max_deliveries_per_day" in changed:
                await self._seed_budget(conn, webhook_id, config, merged)
            if new_secret is not None:
                await self._store_secret(conn, webhook_id, new_secret)
                events.append(
                    NewEvent(
                        EventType.WEBHOOK_SECRET_ROTATED,
                        {"webhook_id": webhook_id, "kind": state.kind},
                    )
                )
            if events:
                await self._append(conn, webhook_stream(webhook_id), state.version, events, admin)
        return webhook_id

    async def delete_webhook(self, webhook_id: int, admin: Admin, kind: str = CRON) -> int:
        """Soft delete: fires stop, history stays readable."""
        async with self.pool.acquire() as conn, conn.transaction():
            state = await self._live_webhook(conn, webhook_id, kind)
            await self._append(
                conn,
                webhook_stream(webhook_id),
                state.version,
                [
                    NewEvent(
                        EventType.WEBHOOK_DELETED, {"webhook_id": webhook_id, "kind": state.kind}
                    )
                ],
                admin,
            )
        return webhook_id

    async def regenerate_secret(self, webhook_id: int, admin: Admin, kind: str = CRON) -> str:
        secret = generate_secret()
        async with self.pool.acquire() as conn, conn.transaction():
            state = await self._live_webhook(conn, webhook_id, kind)
            await self._store_secret(conn, webhook_id, secret)
            await self._append(
                conn,
                webhook_stream(webhook_id),
                state.version,
                [
                    NewEvent(
                        EventType.WEBHOOK_SECRET_ROTATED,
                        {"webhook_id": webhook_id, "kind": state.kind},
                    )
                ],
                admin,
            )
        return secret

    async def trigger_webhook(self, webhook_id: int, admin: Admin) -> int:
        """Request a delivery now, outside the schedule; `nextRunAt` does not move."""
        async with self.pool.acquire() as conn, conn.transaction():
            state = await self._live_webhook(conn, webhook_id, CRON)
            delivery_id: int = await conn.fetchval("select nextval('eventstore.delivery_ids')")
            request = manual_request(state, webhook_id, delivery_id)
            await self._count_manual(conn, state, webhook_id, 1)
            await self._append(conn, delivery_stream(delivery_id), 0, [request], admin)
        return delivery_id

    async def trigger_change_webhook(self, webhook_id: int, paths: list[str], admin: Admin) -> int:
        """A manual delivery of these notes (as they are now) as `update` changes at depth
        0 (CONTRACT §11), whatever the webhook's filters say: the admin chose them."""
        wanted = check_trigger_paths(paths)
        async with self.pool.acquire() as conn, conn.transaction():
            state = await self._live_webhook(conn, webhook_id, CHANGE)
            changes = [{"path": path, "event": "update"} for path in wanted]
            [notes] = await change_notes.notes_now(conn, state.config, [changes])
            missing = [p for p in wanted if p not in notes or notes[p]["removed"]]
            if missing:
                raise InputError("paths", f"no note at {missing[0]!r}")
            # readPatterns, includeContent and the 1 MiB cap, as for the matcher's deliveries
            payload = change_notes.payload_now(state.config, changes, notes)
            delivery_id: int = await conn.fetchval("select nextval('eventstore.delivery_ids')")
            request = manual_request(
                state, webhook_id, delivery_id, depth=0, **payload.request_fields()
            )
            await self._append(conn, delivery_stream(delivery_id), 0, [request], admin)
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
            await replay.take_turn(conn, webhook_id)
            state = await self._live_webhook(conn, webhook_id, None)
            failed = await replay.failed_deliveries(conn, webhook_id, since, until)
            if not failed:
                return []
            ids: list[int] = sorted(
                r["id"]
                for r in await conn.fetch(
                    "select nextval('eventstore.delivery_ids') as id"
                    " from generate_series(1, $1)",
                    len(failed),
                )
            )
            requests = await replay.replay_requests(conn, state, webhook_id, ids, failed)
            causation = Causation.new(actor=admin.actor)  # one command: one correlation
            appends = [
                (delivery_stream(new_id), 0, request, causation)
                for new_id, request in zip(ids, requests, strict=True)
            ]
            await self._count_manual(conn, state, webhook_id, len(appends))
            recorded = await eventstore.append_many(conn, appends, occurred_at=self.clock.now())
            await projection.apply_batch(conn, recorded)
        return ids

    async def _count_manual(
        self, conn: asyncpg.Connection, state: WebhookState, webhook_id: int, n: int
    ) -> None:
        """Manual requests use up the day's budget of a cron webhook with a limit (CONTRACT
        §13): counted in the transaction that appends them, on today's date in its zone.
        They are sent even when the budget is spent — only slots are skipped."""
        if state.kind != CRON or budget.daily_limit(state.config) is None:
            return
        day = budget.local_day(self.clock.now(), state.config["timezone"])
        await budget.count_manual(conn, [(webhook_id, day)] * n)

    async def _seed_budget(
        self,
        conn: asyncpg.Connection,
        webhook_id: int,
        before: dict[str, Any],
        after: dict[str, Any],
    ) -> None:
        """A limit set on a webhook that had none counts the day's deliveries so far
        (CONTRACT §13: "once that many deliveries ... were requested in the current day"),
        from the delivery history: skipped slots were not requested, retries have no row.
        Slots the scheduler requested in the last moments before this command may not be
        projected yet; they are the ones "a change applies from the next slot" allows for."""
        if budget.daily_limit(before) is not None or budget.daily_limit(after) is None:
            return  # counting already (the row is current), or no limit now
        day = budget.local_day(self.clock.now(), after["timezone"])
        start, end = budget.day_bounds(day, after["timezone"])
        requested = await conn.fetchval(
            """
            select count(*) from admin.deliveries
            where cron_webhook_id = $1 and status <> 'skipped'
              and created_at >= $2 and created_at < $3
            """,
            webhook_id,
            start,
            end,
        )
        await budget.seed(conn, (webhook_id, day), requested)

    async def _live_webhook(
        self, conn: asyncpg.Connection, webhook_id: int, kind: str | None
    ) -> WebhookState:
        """The webhook as its stream tells it; NOT_FOUND when deleted or of the other kind
        (cron and change webhooks share one id space; `kind` None: either)."""
        state = await load_webhook(conn, webhook_id)
        if state is None or state.deleted or kind not in (None, state.kind):
            raise NotFound("webhook", webhook_id)
        return state

    async def _store_secret(self, conn: asyncpg.Connection, webhook_id: int, secret: str) -> None:
        await conn.execute(
            """
            insert into shared.webhook_secrets (webhook_id, ciphertext) values ($1, $2)
            on conflict (webhook_id) do update
                set ciphertext = excluded.ciphertext, updated_at = now()
            """,
            webhook_id,
            self.secrets.seal(secret),
        )

    async def _claim_key(self, conn: asyncpg.Connection, key: str, webhook_id: int) -> int | None:
        """Claim `key` for the webhook about to be created; or the webhook it created first
        (a key is kept IDEMPOTENCY_WINDOW: an older claim is taken over). Waits for a
        concurrent holder of the same key, then sees its row."""
        now = self.clock.now()
        claimed = await conn.fetchval(
            """
            insert into admin.idempotency_keys (key, webhook_id, created_at) values ($1, $2, $3)
            on conflict (key) do update
                set webhook_id = excluded.webhook_id, created_at = excluded.created_at
                where admin.idempotency_keys.created_at <= $4
            returning webhook_id
            """,
            key,
            webhook_id,
            now,
            now - IDEMPOTENCY_WINDOW,
        )
        if claimed is not None:
            return None
        first: int = await conn.fetchval(
            "select webhook_id from admin.idempotency_keys where key = $1", key
        )
        return first

    async def _replayed_secret(self, conn: asyncpg.Connection, webhook_id: int, kind: str) -> str:
        """The first answer's secret, while it is still true (CONTRACT §15): a replay never
        reveals a secret again once it was rotated or replaced, nor a deleted webhook."""
        events = await eventstore.read_stream(conn, webhook_stream(webhook_id))
        if any(e.type == EventType.WEBHOOK_DELETED for e in events):
            raise NotFound("webhook", webhook_id)
        if events and events[0].data.get("kind", CRON) != kind:
            raise Conflict(f"idempotency key already used for webhook {webhook_id} of another kind")
        if any(e.type == EventType.WEBHOOK_SECRET_ROTATED for e in events):
            raise Conflict(
                f"idempotency key already used for webhook {webhook_id}, whose secret has"
                " been rotated since: the first answer is no longer true"
            )
        return await self._current_secret(conn, webhook_id)

    async def _current_secret(self, conn: asyncpg.Connection, webhook_id: int) -> str:
        sealed = await conn.fetchval(
            "select ciphertext from shared.webhook_secrets where webhook_id = $1", webhook_id
        )
        return self.secrets.open(sealed)
