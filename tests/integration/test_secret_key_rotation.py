"""Rotating CRONHOOKS_SECRET_KEY (docs/deployment.md) with the real services and Postgres:
values sealed under key A open once the services run with B and A as previous; `reseal`
moves every stored value to B (B alone opens them after), a rerun changes nothing, and a
dispatcher delivering meanwhile keeps signing correctly (checked by the standardwebhooks
library and an independent Ed25519)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from datetime import UTC, datetime

import asyncpg
from standardwebhooks.webhooks import Webhook

from cronhooks_cli.reseal import SEALED_TABLES, reseal
from cronhooks_common import db, keys
from cronhooks_common.clock import ManualClock
from cronhooks_common.crypto import SecretBox
from cronhooks_common.secret_probe import check_secret_key
from cronhooks_common.settings import Settings
from tests.support import ed25519_ref
from tests.support.agent import Agent, Received, ok
from tests.support.flows import create_webhook, finished, trigger
from tests.support.system import start_system

A = "key-a-0123456789abcdef0123456789abcdef"
B = "key-b-0123456789abcdef0123456789abcdef"
HOOKS = 12


async def sealed_values(dsn: str) -> dict[tuple[str, str, object], bytes]:
    """Every sealed value stored, by (table, column, row key)."""
    conn = await db.connect(dsn, name="rotation")
    try:
        found = {}
        for table in SEALED_TABLES:
            for row in await conn.fetch(table.batch_sql().replace(" for update", ""), None, 10**6):
                for column in table.columns:
                    if row[column] is not None:
                        found[(table.name, column, row["key"])] = row[column]
        return found
    finally:
        await conn.close()


def opens_with(box: SecretBox, values: dict[tuple[str, str, object], bytes]) -> bool:
    try:
        for sealed in values.values():
            box.open(sealed)
    except ValueError:
        return False
    return True


def signed_correctly(got: Received, secret: str, public_key: str | None) -> bool:
    if public_key is None:
        Webhook(secret).verify(got.raw, got.headers)  # raises if not
        return True
    signed = f"{got.headers['webhook-id']}.{got.headers['webhook-timestamp']}.".encode() + got.raw
    raw = base64.b64decode(public_key.removeprefix("whpk_"))
    return any(
        ed25519_ref.verify(raw, signed, base64.b64decode(entry.partition(",")[2]))
        for entry in got.headers["webhook-signature"].split()
    )


async def public_key(dsn: str, hook: int) -> str | None:
    conn = await db.connect(dsn, name="rotation")
    try:
        row = await conn.fetchrow(
            "select scheme, public_key from shared.webhook_secrets where webhook_id = $1", hook
        )
        return row["public_key"] if row["scheme"] == "ED25519" else None
    finally:
        await conn.close()


async def test_rotate_a_to_b_reseal_while_delivering_then_b_alone_opens_everything(
    settings: Settings, agent: Agent
) -> None:
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    under_a = dataclasses.replace(settings, secret_key=A)
    hooks: dict[int, tuple[str, str | None]] = {}
    async with start_system(under_a, clock, agent) as system:
        for i in range(HOOKS):
            scheme = "ED25519" if i % 2 else "HMAC"
            hook, secret = await create_webhook(
                system, system.admin, agent.url_for("r", ok), signatureScheme=scheme
            )
            hooks[hook] = (secret, None)
        # A rotation with grace: the previous secret and private key are sealed too.
        hook = list(hooks)[1]  # an ED25519 one
        _, body = await system.graphql(
            system.admin,
            "mutation($id: Int!) { regenerateCronWebhookSecret(id: $id, graceSeconds: 3600)"
            " { secret } }",
            {"id": hook},
        )
        hooks[hook] = (body["data"]["regenerateCronWebhookSecret"]["secret"], None)
        conn = await db.connect(system.dsn, name="rotation")
        try:
            await keys.active_key(conn, SecretBox(A), algorithm="RS256", now=clock.now())
            await check_secret_key(conn, SecretBox(A), system.dsn)
        finally:
            await conn.close()
    for hook, (secret, _) in hooks.items():
        hooks[hook] = (secret, await public_key(settings.database_url, hook))

    before = await sealed_values(settings.database_url)
    columns = {(t, c) for t, c, _ in before}
    assert len(columns) == 6, columns  # every sealed column holds a value here
    assert opens_with(SecretBox(A), before) and not opens_with(SecretBox(B), before)

    rotated = dataclasses.replace(settings, secret_key=B, secret_key_previous=(A,))
    async with start_system(rotated, clock, agent) as system:
        conn: asyncpg.Connection = await db.connect(system.dsn, name="rotation")
        try:
            await check_secret_key(conn, SecretBox.of(rotated), system.dsn)

            async def deliver_all() -> list[int]:
                ids = []
                for _ in range(3):
                    for hook in hooks:
                        ids.append(await trigger(system, system.admin, hook))
                return ids

            delivering = asyncio.create_task(deliver_all())
            report = await reseal(conn, SecretBox.of(rotated), batch=1)
            ids = await delivering
        finally:
            await conn.close()
        for delivery_id in ids:
            assert (await finished(system, system.admin, delivery_id))["status"] == "success"

        resealed = sum(c.resealed for c in report.tables.values())
        assert resealed == len(before) and report.unreadable == 0, report

        # Every delivery, before, during and after the reseal, is signed with its secret.
        got = agent.at("r")
        assert len(got) == 3 * HOOKS
        for received in got:
            hook = received.body["webhook_id"]
            secret, public = hooks[hook]
            assert signed_correctly(received, secret, public), hook

    after = await sealed_values(settings.database_url)
    assert after.keys() == before.keys()
    assert opens_with(SecretBox(B), after) and not opens_with(SecretBox(A), after)
    assert {k: SecretBox(B).open(v) for k, v in after.items()} == {
        k: SecretBox(A).open(v) for k, v in before.items()
    }

    conn = await db.connect(settings.database_url, name="rotation")
    try:
        again = await reseal(conn, SecretBox(B, [A]))
        await check_secret_key(conn, SecretBox(B), settings.database_url)
    finally:
        await conn.close()
    assert sum(c.resealed for c in again.tables.values()) == 0
    assert sum(c.current for c in again.tables.values()) == len(before)
    assert await sealed_values(settings.database_url) == after, "a rerun changes nothing"
