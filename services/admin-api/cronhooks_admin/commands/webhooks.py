"""Webhook commands of both kinds (cron and change, CONTRACT §11): create, update, delete,
regenerate the secret. Validate → load the webhook from its stream → append its
`webhook.*` events with the secret (never in an event) in one transaction → answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import daily_budget, idempotency
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.store import live_webhook, record
from cronhooks_admin.commands.validation import (
    WebhookInput,
    camel,
    check_idempotency_key,
    check_schedule,
    check_secret,
    normalize,
)
from cronhooks_admin.errors import InputError
from cronhooks_common.clock import Clock
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import (
    CHANGE,
    CRON,
    RUN_TIMEOUT_SECONDS,
    UNSET,
    ConfigData,
    Kind,
    WebhookConfig,
    WebhookCreated,
    WebhookDeleted,
    WebhookSecretRotated,
    WebhookUpdated,
    webhook_stream,
)
from cronhooks_common.signing import generate_secret
from cronhooks_common.webhooks import WebhookState, config_fields


def kind_of(kind: str) -> Kind:
    return "change" if kind == CHANGE else "cron"


def config_of(state: WebhookState) -> WebhookConfig:
    """The webhook's settings as its stream tells them."""
    return msgspec.convert(state.config, WebhookConfig)


def setting(config: WebhookConfig, field: str) -> Any:
    """A setting's value as JSON (as `normalize` gives it); None when the configuration
    lacks it (written before it existed)."""
    value = getattr(config, field)
    return None if value is UNSET else msgspec.to_builtins(value)


@dataclass(frozen=True, slots=True)
class WebhookCommands:
    pool: asyncpg.Pool
    clock: Clock
    secrets: SecretBox
    default_timezone: str
    allow_private: bool = False

    async def create(self, fields: WebhookInput, admin: Admin, kind: str = CRON) -> tuple[int, str]:
        """Create a `kind` webhook; return (id, secret). An idempotency key seen before
        returns the webhook it created first."""
        key = check_idempotency_key(fields.get("idempotency_key"))
        settings = normalize(fields, allow_private=self.allow_private, kind=kind)
        settings.setdefault("run_timeout_seconds", RUN_TIMEOUT_SECONDS)  # omitted: the default
        if kind == CRON:
            settings.setdefault("timezone", self.default_timezone)
            settings.setdefault("max_deliveries_per_day", None)  # omitted: no limit
            settings.setdefault("max_cost_per_day", [])  # omitted (not over GraphQL): none
            check_schedule(settings)
        secret = check_secret(fields.get("secret")) or generate_secret()
        missing = [f for f in config_fields(kind) if f not in settings]
        if missing:
            raise InputError(camel(missing[0]), "is required")
        config = msgspec.convert(settings, WebhookConfig)
        async with self.pool.acquire() as conn, conn.transaction():
            webhook_id: int = await conn.fetchval(sql.NEXT_WEBHOOK_ID)
            if key is not None:
                first = await idempotency.claim(conn, key, webhook_id, self.clock.now())
                if first is not None:
                    return first, await idempotency.first_secret(conn, self.secrets, first, kind)
            await conn.execute(sql.INSERT_SECRET, webhook_id, self.secrets.seal(secret))
            created = WebhookCreated(
                webhook_id=webhook_id,
                kind=kind_of(kind),
                config=config,
                changed=list(config_fields(kind)),
            )
            await self._record(conn, webhook_id, 0, created, admin=admin)
        return webhook_id, secret

    async def update(self, fields: WebhookInput, admin: Admin, kind: str = CRON) -> int:
        webhook_id = int(fields["id"])
        changes = normalize(fields, allow_private=self.allow_private, kind=kind)
        new_secret = check_secret(fields.get("secret"))
        async with self.pool.acquire() as conn, conn.transaction():
            state = await live_webhook(conn, webhook_id, kind)
            config = config_of(state)
            # Through JSON: the changes are JSON's values (cost limits dicts, not structs).
            merged = msgspec.convert({**msgspec.to_builtins(config), **changes}, WebhookConfig)
            if kind == CRON and changes.keys() & {"cron_schedule", "timezone"}:
                settings: ConfigData = msgspec.to_builtins(merged)  # (cron: both are set)
                check_schedule(settings)
            # A setting added later (executionGroup, ...) is absent from older configs: None.
            changed = sorted(k for k, v in changes.items() if v != setting(config, k))
            events: list[WebhookUpdated | WebhookSecretRotated] = []
            if changed:
                events.append(
                    WebhookUpdated(
                        webhook_id=webhook_id,
                        kind=kind_of(state.kind),
                        config=merged,
                        changed=changed,
                    )
                )
            if kind == CRON and "max_deliveries_per_day" in changed:
                await daily_budget.seed(conn, webhook_id, config, merged, self.clock.now())
            if new_secret is not None:
                await self._store_secret(conn, webhook_id, new_secret)
                events.append(WebhookSecretRotated(webhook_id=webhook_id, kind=kind_of(state.kind)))
            if events:
                await self._record(conn, webhook_id, state.version, *events, admin=admin)
        return webhook_id

    async def delete(self, webhook_id: int, admin: Admin, kind: str = CRON) -> int:
        """Soft delete: fires stop, history stays readable."""
        async with self.pool.acquire() as conn, conn.transaction():
            state = await live_webhook(conn, webhook_id, kind)
            deleted = WebhookDeleted(webhook_id=webhook_id, kind=kind_of(state.kind))
            await self._record(conn, webhook_id, state.version, deleted, admin=admin)
        return webhook_id

    async def regenerate_secret(self, webhook_id: int, admin: Admin, kind: str = CRON) -> str:
        secret = generate_secret()
        async with self.pool.acquire() as conn, conn.transaction():
            state = await live_webhook(conn, webhook_id, kind)
            await self._store_secret(conn, webhook_id, secret)
            rotated = WebhookSecretRotated(webhook_id=webhook_id, kind=kind_of(state.kind))
            await self._record(conn, webhook_id, state.version, rotated, admin=admin)
        return secret

    async def _record(
        self,
        conn: asyncpg.Connection,
        webhook_id: int,
        version: int,
        *events: WebhookCreated | WebhookUpdated | WebhookDeleted | WebhookSecretRotated,
        admin: Admin,
    ) -> None:
        await record(
            conn,
            webhook_stream(webhook_id),
            version,
            events,
            actor=admin.actor,
            now=self.clock.now(),
        )

    async def _store_secret(self, conn: asyncpg.Connection, webhook_id: int, secret: str) -> None:
        await conn.execute(sql.STORE_SECRET, webhook_id, self.secrets.seal(secret))
