"""Credentials only over TLS (CONTRACT §17), over admin GraphQL: a webhook whose deliveries
carry a token or notes may not target plain http:// unless on loopback or
CRONHOOKS_ALLOW_INSECURE_TARGETS=true; create and update of both kinds, enabled or not,
refused with the field and the exact reason, and nothing changed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.flows import create_change_webhook, create_webhook, event_count
from tests.support.graphql import (
    CREATE_CHANGE_WEBHOOK,
    CREATE_WEBHOOK,
    UPDATE_CHANGE_WEBHOOK,
    UPDATE_WEBHOOK,
)
from tests.support.system import System

REASON = "must be https when the delivery carries a token or notes"
PLAIN = "http://agent.example/hook"
CRON_READ = """query($id: Int!) { cronWebhook(id: $id) { url passApiKey attachNotes enabled } }"""
CHANGE_READ = (
    """query($id: Int!) { changeWebhook(id: $id) { url passApiKey includeContent enabled } }"""
)

pytestmark = pytest.mark.system(services=("admin-api",))


def refused(body: dict[str, Any]) -> None:
    [error] = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": "url"}, error
    assert REASON in error["message"], error["message"]


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("cron", {"passApiKey": True}),
        ("cron", {"attachNotes": ["notes/*.md"]}),
        ("cron", {"passApiKey": True, "enabled": False}),
        ("change", {}),  # includeContent is true by default
        ("change", {"includeContent": False, "passApiKey": True}),
        ("change", {"includeContent": True, "enabled": False}),
    ],
)
async def test_create_refuses_plain_http_to_another_host(
    system: System, kind: str, fields: dict[str, Any]
) -> None:
    before = await event_count(system.dsn)
    if kind == "cron":
        document, given = CREATE_WEBHOOK, {"cronSchedule": "0 9 * * 1-5"}
    else:
        document, given = CREATE_CHANGE_WEBHOOK, {"includePatterns": ["**"]}
    _, body = await system.graphql(
        system.admin, document, {"input": {"url": PLAIN, **given, **fields}}
    )
    refused(body)
    assert await event_count(system.dsn) == before


@pytest.mark.parametrize(
    "url",
    [
        "https://agent.example/hook",
        "http://127.0.0.1:9/hook",
        "http://127.3.4.5/hook",
        "http://[::1]:9/hook",
        "http://localhost:9/hook",
    ],
)
async def test_https_or_loopback_is_accepted(system: System, url: str) -> None:
    await create_webhook(system, system.admin, url, passApiKey=True, attachNotes=["a/*"])
    await create_change_webhook(system, system.admin, url, includePatterns=["**"])


async def test_plain_http_without_credentials_is_accepted(system: System) -> None:
    await create_webhook(system, system.admin, PLAIN)
    await create_change_webhook(
        system, system.admin, PLAIN, includePatterns=["**"], includeContent=False
    )


async def test_updates_that_would_send_credentials_in_clear_change_nothing(system: System) -> None:
    cron_id, _ = await create_webhook(system, system.admin, PLAIN, enabled=False)
    change_id, _ = await create_change_webhook(
        system, system.admin, PLAIN, includePatterns=["**"], includeContent=False
    )
    secure_id, _ = await create_webhook(
        system, system.admin, "https://agent.example/hook", passApiKey=True
    )
    before = await event_count(system.dsn)
    attempts = [
        (UPDATE_WEBHOOK, {"id": cron_id, "passApiKey": True}),  # paused: refused all the same
        (UPDATE_WEBHOOK, {"id": cron_id, "attachNotes": ["notes/**"]}),
        (UPDATE_WEBHOOK, {"id": cron_id, "enabled": True, "passApiKey": True}),
        (UPDATE_WEBHOOK, {"id": secure_id, "url": PLAIN}),
        (UPDATE_CHANGE_WEBHOOK, {"id": change_id, "includeContent": True}),
        (UPDATE_CHANGE_WEBHOOK, {"id": change_id, "passApiKey": True}),
    ]
    for document, given in attempts:
        _, body = await system.graphql(system.admin, document, {"input": given})
        refused(body)
    assert await event_count(system.dsn) == before
    _, body = await system.graphql(system.admin, CRON_READ, {"id": cron_id})
    assert body["data"]["cronWebhook"] == {
        "url": PLAIN,
        "passApiKey": False,
        "attachNotes": [],
        "enabled": False,
    }
    _, body = await system.graphql(system.admin, CRON_READ, {"id": secure_id})
    assert body["data"]["cronWebhook"]["url"] == "https://agent.example/hook"
    _, body = await system.graphql(system.admin, CHANGE_READ, {"id": change_id})
    assert body["data"]["changeWebhook"] == {
        "url": PLAIN,
        "passApiKey": False,
        "includeContent": False,
        "enabled": True,
    }
    # Moving to https together with the token is fine; so is an unrelated change.
    _, body = await system.graphql(
        system.admin,
        UPDATE_WEBHOOK,
        {"input": {"id": cron_id, "url": "https://agent.example/hook", "passApiKey": True}},
    )
    assert "errors" not in body, body
    _, body = await system.graphql(
        system.admin, UPDATE_CHANGE_WEBHOOK, {"input": {"id": change_id, "maxDepth": 2}}
    )
    assert "errors" not in body, body


@pytest.mark.system(settings={"allow_insecure_targets": True})
async def test_the_setting_lifts_the_rule(system: System) -> None:
    cron_id, _ = await create_webhook(system, system.admin, PLAIN, passApiKey=True)
    await create_change_webhook(system, system.admin, PLAIN, includePatterns=["**"])
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": cron_id, "attachNotes": ["a/*"]}}
    )
    assert "errors" not in body, body
