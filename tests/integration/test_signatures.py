"""Ed25519 signatures and rotation with overlap (CONTRACT §17) with the real services, a real
agent on loopback receiving real deliveries, and a moved clock. Signatures are checked by
the `standardwebhooks` library (v1), an independent Ed25519 (tests.support.ed25519_ref,
v1a) and trip2g's HMAC — never by cronhooks' code."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.support import ed25519_ref
from tests.support.agent import Received
from tests.support.flows import create_change_webhook, create_webhook, finished, trigger
from tests.support.inprocess import eventually
from tests.support.system import System

# With the real time: the library checks its 5-minute tolerance against the real clock.
pytestmark = pytest.mark.system()

FIELDS = "id signatureScheme publicKey previousSecretExpiresAt hasSecret"
REGENERATE = f"""mutation($id: Int!, $grace: Int) {{
  regenerateCronWebhookSecret(id: $id, graceSeconds: $grace) {{ secret cronWebhook {{ {FIELDS} }} }}
}}"""
REGENERATE_CHANGE = f"""mutation($id: Int!, $grace: Int) {{
  regenerateChangeWebhookSecret(id: $id, graceSeconds: $grace) {{
    secret changeWebhook {{ {FIELDS} }} }}
}}"""
UPDATE = f"""mutation($input: UpdateCronWebhookInput!) {{
  updateCronWebhook(input: $input) {{ cronWebhook {{ {FIELDS} }} }} }}"""
PUBLIC_KEY = re.compile(r"whpk_[A-Za-z0-9+/]{43}=")


def entries(got: Received) -> list[tuple[str, bytes]]:
    return [
        (version, base64.b64decode(sig))
        for version, _, sig in (e.partition(",") for e in got.headers["webhook-signature"].split())
    ]


def signed_text(got: Received) -> bytes:
    return f"{got.headers['webhook-id']}.{got.headers['webhook-timestamp']}.".encode() + got.raw


def trip2g_valid(secret: str, got: Received) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), got.raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, got.headers["X-Webhook-Signature"])


def raw_key(public_key: str) -> bytes:
    assert PUBLIC_KEY.fullmatch(public_key), public_key
    return base64.b64decode(public_key.removeprefix("whpk_"))


async def webhook(system: System, hook: int) -> dict[str, Any]:
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {hook}) {{ {FIELDS} }} }}")
    return body["data"]["cronWebhook"]  # type: ignore[no-any-return]


async def regenerate(system: System, hook: int, grace: int | None = 0) -> dict[str, Any]:
    _, body = await system.graphql(system.admin, REGENERATE, {"id": hook, "grace": grace})
    assert "errors" not in body, body
    return body["data"]["regenerateCronWebhookSecret"]  # type: ignore[no-any-return]


async def delivered(system: System, hook: int, name: str) -> Received:
    before = len(system.agent.at(name))
    await finished(system, system.admin, await trigger(system, system.admin, hook))
    return (await system.agent.wait_for(before + 1, name=name))[-1]


def zulu(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_an_hmac_webhook_signs_v1_only(system: System) -> None:
    hook, secret = await create_webhook(system, system.admin, system.agent.url_for("h", ok))
    assert await webhook(system, hook) == {
        "id": hook,
        "signatureScheme": "HMAC",  # the default
        "publicKey": None,
        "previousSecretExpiresAt": None,
        "hasSecret": True,
    }
    got = await delivered(system, hook, "h")
    assert [v for v, _ in entries(got)] == ["v1"]
    Webhook(secret).verify(got.raw, got.headers)
    assert trip2g_valid(secret, got)


async def test_an_ed25519_webhook_signs_v1a_only_and_still_sends_trip2g_hmac(
    system: System,
) -> None:
    hook, secret = await create_webhook(
        system, system.admin, system.agent.url_for("e", ok), signatureScheme="ED25519"
    )
    public = (await webhook(system, hook))["publicKey"]
    got = await delivered(system, hook, "e")
    [(version, signature)] = entries(got)
    assert version == "v1a"
    assert ed25519_ref.verify(raw_key(public), signed_text(got), signature)
    assert trip2g_valid(secret, got)  # trip2g receivers work unchanged
    with pytest.raises(WebhookVerificationError):  # no v1 entry to verify with the secret
        Webhook(secret).verify(got.raw, got.headers)


async def test_during_a_grace_both_secrets_sign_and_after_it_only_the_new(
    system: System,
) -> None:
    hook, old = await create_webhook(system, system.admin, system.agent.url_for("r", ok))
    await delivered(system, hook, "r")  # the dispatcher's cache is warm with the old secret
    rotated_at = system.clock.now()
    answer = await regenerate(system, hook, 60)
    new = answer["secret"]
    expires = rotated_at + timedelta(seconds=60)
    assert answer["cronWebhook"]["previousSecretExpiresAt"] == zulu(expires)

    during = await delivered(system, hook, "r")
    assert [v for v, _ in entries(during)] == ["v1", "v1"]
    for secret in (new, old):  # each verified with its own secret by the library
        Webhook(secret).verify(during.raw, during.headers)
    assert trip2g_valid(new, during) and not trip2g_valid(old, during)

    # After the grace, the old secret signs nothing, though its row still holds it and the
    # dispatcher's cache is warm: the clock decides.
    system.clock.set(expires)
    assert await previous_sealed(system, hook) is not None
    assert (await webhook(system, hook))["previousSecretExpiresAt"] is None
    after = await delivered(system, hook, "r")
    assert [v for v, _ in entries(after)] == ["v1"]
    Webhook(new).verify(after.raw, after.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(after.raw, after.headers)
    # ... and the scheduler's retention step forgets it.
    system.services["scheduler"].retention.poke()

    async def forgotten() -> bool:
        return await previous_sealed(system, hook) is None

    await eventually(forgotten)


async def test_an_ed25519_rotation_signs_with_both_key_pairs(system: System) -> None:
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("k", ok), signatureScheme="ED25519"
    )
    old_key = (await webhook(system, hook))["publicKey"]
    answer = await regenerate(system, hook, 3600)
    new_key = answer["cronWebhook"]["publicKey"]
    assert new_key != old_key and PUBLIC_KEY.fullmatch(new_key)  # the pair is renewed
    got = await delivered(system, hook, "k")
    (v_new, s_new), (v_old, s_old) = entries(got)
    assert (v_new, v_old) == ("v1a", "v1a")
    assert ed25519_ref.verify(raw_key(new_key), signed_text(got), s_new)
    assert ed25519_ref.verify(raw_key(old_key), signed_text(got), s_old)
    assert trip2g_valid(answer["secret"], got)


async def test_grace_bounds_and_previous_expiry_set_replaced_and_cleared(system: System) -> None:
    hook, _ = await create_webhook(system, system.admin, system.agent.url_for("b", ok))
    for grace in (-1, 604801, None):
        _, body = await system.graphql(system.admin, REGENERATE, {"id": hook, "grace": grace})
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert error["extensions"]["field"] == "graceSeconds"
    now = system.clock.now()
    first = await regenerate(system, hook, 604800)
    assert first["cronWebhook"]["previousSecretExpiresAt"] == zulu(now + timedelta(days=7))
    system.clock.advance(timedelta(seconds=10))
    second = await regenerate(system, hook, 30)  # replaces the earlier previous secret
    expected = zulu(now + timedelta(seconds=40))
    assert second["cronWebhook"]["previousSecretExpiresAt"] == expected
    assert (await webhook(system, hook))["previousSecretExpiresAt"] == expected
    _, body = await system.graphql(  # the default grace is 0: none honoured
        system.admin,
        f"mutation {{ regenerateCronWebhookSecret(id: {hook}) {{ cronWebhook {{ {FIELDS} }} }} }}",
    )
    assert (
        body["data"]["regenerateCronWebhookSecret"]["cronWebhook"]["previousSecretExpiresAt"]
        is None
    )
    assert await previous_sealed(system, hook) is None
    # A secret the admin gives replaces the old one at once, ending any grace.
    assert (await regenerate(system, hook, 30))["cronWebhook"]["previousSecretExpiresAt"]
    given = await update(system, {"id": hook, "secret": "an admin's own secret, 24+ chars"})
    assert given["previousSecretExpiresAt"] is None
    assert await previous_sealed(system, hook) is None


async def test_switching_scheme_makes_a_key_pair_once(system: System) -> None:
    hook, _ = await create_webhook(system, system.admin, system.agent.url_for("s", ok))
    switched = await update(system, {"id": hook, "signatureScheme": "ED25519"})
    key = switched["publicKey"]
    assert switched["signatureScheme"] == "ED25519" and PUBLIC_KEY.fullmatch(key)
    back = await update(system, {"id": hook, "signatureScheme": "HMAC"})
    assert (back["signatureScheme"], back["publicKey"]) == ("HMAC", None)
    again = await update(system, {"id": hook, "signatureScheme": "ED25519"})
    assert again["publicKey"] == key  # the same pair: receivers keep their public key
    _, body = await system.graphql(
        system.admin, UPDATE, {"input": {"id": hook, "signatureScheme": "RSA"}}
    )
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["field"] == "signatureScheme"


async def test_change_webhooks_have_the_same_fields_and_no_secret_or_key_leaks(
    system: System,
) -> None:
    hook, secret = await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("c", ok),
        includePatterns=["*"],
        signatureScheme="ED25519",
    )
    now = system.clock.now()
    _, body = await system.graphql(system.admin, REGENERATE_CHANGE, {"id": hook, "grace": 120})
    answer = body["data"]["regenerateChangeWebhookSecret"]
    got = answer["changeWebhook"]
    assert got["signatureScheme"] == "ED25519" and PUBLIC_KEY.fullmatch(got["publicKey"])
    assert got["previousSecretExpiresAt"] == zulu(now + timedelta(seconds=120))
    _, body = await system.graphql(system.admin, REGENERATE_CHANGE, {"id": hook, "grace": 604801})
    assert body["errors"][0]["extensions"]["field"] == "graceSeconds"
    # Neither secret, nor any private key, is in any answer, event or table but sealed.
    conn = await asyncpg.connect(system.dsn)
    try:
        row = await conn.fetchrow(
            "select * from shared.webhook_secrets where webhook_id = $1", hook
        )
        events = await conn.fetchval("select string_agg(data::text, ' ') from eventstore.events")
        admin = await conn.fetchval("select string_agg(w::text, ' ') from admin.webhooks w")
    finally:
        await conn.close()
    assert row["previous_ciphertext"] is not None and row["previous_private_key"] is not None
    for plain in (secret, answer["secret"]):
        assert plain not in events and plain not in admin
        assert plain.encode() not in row["ciphertext"] + row["previous_ciphertext"]
    _, body = await system.graphql(system.admin, f"{{ changeWebhook(id: {hook}) {{ {FIELDS} }} }}")
    assert secret not in str(body) and answer["secret"] not in str(body)


async def update(system: System, fields: dict[str, Any]) -> dict[str, Any]:
    _, body = await system.graphql(system.admin, UPDATE, {"input": fields})
    assert "errors" not in body, body
    return body["data"]["updateCronWebhook"]["cronWebhook"]  # type: ignore[no-any-return]


async def previous_sealed(system: System, hook: int) -> bytes | None:
    conn = await asyncpg.connect(system.dsn)
    try:
        sealed: bytes | None = await conn.fetchval(
            "select previous_ciphertext from shared.webhook_secrets where webhook_id = $1", hook
        )
        return sealed
    finally:
        await conn.close()


async def ok(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok"})
