"""Webhook commands of both kinds (cron and change, CONTRACT §11): create, update, delete,
regenerate the secret. Validate → load the webhook from its stream → append its
`webhook.*` events with the secret (never in an event) in one transaction → answer.

The secret, the signature scheme and the Ed25519 key pair (CONTRACT §17) live sealed in
`shared.webhook_secrets`, written in the transaction of the events: a regenerate with
`graceSeconds` keeps the previous secret and private key there (sealed, never readable)
until `previous_expires_at`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec

from cronhooks_admin.auth import Admin
from cronhooks_admin.commands import daily_budget, idempotency
from cronhooks_admin.commands import queries as sql
from cronhooks_admin.commands.store import live_webhook, record
from cronhooks_admin.commands.transport import FIELDS as TRANSPORT_FIELDS
from cronhooks_admin.commands.transport import check_transport
from cronhooks_admin.commands.validation import (
    WebhookInput,
    camel,
    check_grace_seconds,
    check_idempotency_key,
    check_schedule,
    check_secret,
    normalize,
)
from cronhooks_admin.errors import InputError
from cronhooks_common.clock import Clock, iso
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
from cronhooks_common.signing import generate_private_key, generate_secret, public_key_text
from cronhooks_common.webhook_keys import ED25519, HMAC, seal_private_key
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
    allow_insecure: bool = False  # CRONHOOKS_ALLOW_INSECURE_TARGETS (CONTRACT §17)

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
        settings.setdefault("signature_scheme", HMAC)
        settings.setdefault("retry_deadline_seconds", 0)  # omitted: no deadline
        secret = check_secret(fields.get("secret")) or generate_secret()
        missing = [f for f in config_fields(kind) if f not in settings]
        if missing:
            raise InputError(camel(missing[0]), "is required")
        check_transport(settings, kind, allow_insecure=self.allow_insecure)
        config = msgspec.convert(settings, WebhookConfig)
        async with self.pool.acquire() as conn, conn.transaction():
            webhook_id: int = await conn.fetchval(sql.NEXT_WEBHOOK_ID)
            if key is not None:
                first = await idempotency.claim(conn, key, webhook_id, self.clock.now())
                if first is not None:
                    return first, await idempotency.first_secret(conn, self.secrets, first, kind)
            # An ED25519 webhook's own key pair; an HMAC one gets its pair if it switches.
            scheme = settings["signature_scheme"]
            pair = self._key_pair() if scheme == ED25519 else (None, None)
            await conn.execute(
                sql.INSERT_SECRET, webhook_id, self.secrets.seal(secret), scheme, *pair
            )
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
            if changes.keys() & TRANSPORT_FIELDS:
                whole = msgspec.to_builtins(merged)
                check_transport(whole, state.kind, allow_insecure=self.allow_insecure)
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
            if "signature_scheme" in changed:
                scheme = changes["signature_scheme"]
                await conn.execute(sql.SET_SCHEME, webhook_id, scheme, *self._key_pair())
            if new_secret is not None:
                await self._store_secret(conn, webhook_id, new_secret)
                # A secret the admin gave replaces the old one at once: no grace.
                replaced = WebhookSecretRotated(
                    webhook_id=webhook_id,
                    kind=kind_of(state.kind),
                    grace_seconds=0,
                    previous_expires_at=None,
                )
                events.append(replaced)
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

    async def regenerate_secret(
        self, webhook_id: int, admin: Admin, kind: str = CRON, grace_seconds: int | None = 0
    ) -> str:
        """A new secret (and key pair, when the webhook has one or signs with Ed25519).
        With `grace_seconds`, deliveries are signed with the previous secret too until
        then (CONTRACT §17); a rotation replaces any previous secret still honoured."""
        grace = check_grace_seconds(grace_seconds)
        secret = generate_secret()
        async with self.pool.acquire() as conn, conn.transaction():
            state = await live_webhook(conn, webhook_id, kind)
            now = self.clock.now()
            expires = now + timedelta(seconds=grace) if grace else None
            sealed = self.secrets.seal(secret)
            await conn.execute(sql.ROTATE_SECRET, webhook_id, sealed, *self._key_pair(), expires)
            rotated = WebhookSecretRotated(
                webhook_id=webhook_id,
                kind=kind_of(state.kind),
                grace_seconds=grace,
                previous_expires_at=None if expires is None else iso(expires),
            )
            await self._record(conn, webhook_id, state.version, rotated, admin=admin)
        return secret

    def _key_pair(self) -> tuple[bytes, str]:
        """A new Ed25519 key pair: (the private key sealed, the public key as shown)."""
        private = generate_private_key()
        return seal_private_key(self.secrets, private), public_key_text(private)

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
