"""Calling the agent token API in tests: mint api_tokens as the dispatcher does, and call
the importer's REST routes and GraphQL endpoint."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import aiohttp

from cronhooks_common.settings import Settings
from cronhooks_common.tokens import ApiTokens
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.inprocess import Running

if TYPE_CHECKING:
    from tests.support.system import System

NOW = datetime.now(UTC).replace(microsecond=0)
# The id `open_webhook` gets in a fresh database: tokens minted here are its deliveries'.
OPEN_WEBHOOK = 1


async def open_webhook(r: Running | System, admin: str) -> int:
    """A live webhook that lets its tokens read and write everything, as deep as 5: tokens
    follow their webhook's state, so the tokens these tests mint need one."""
    status, body = await r.graphql(
        admin,
        CREATE_WEBHOOK,
        {
            "input": {
                "url": "https://agent.example/hook",
                "cronSchedule": "0 0 1 1 *",
                "readPatterns": ["*"],
                "writePatterns": ["*"],
                "maxDepth": 5,
            }
        },
    )
    assert status == 200 and "errors" not in body, body
    return int(body["data"]["createCronWebhook"]["cronWebhook"]["id"])


def tokens(settings: Settings, **over: Any) -> ApiTokens:
    return ApiTokens(
        master_key=over.get("key", settings.secret_key),
        issuer=over.get("issuer", settings.public_url),
        ttl_seconds=over.get("ttl", settings.api_token_ttl_seconds),
    )


def mint(
    settings: Settings,
    *,
    read: list[str] | None = None,
    write: list[str] | None = None,
    depth: int = 1,
    max_depth: int = 1,
    now: datetime = NOW,
    **over: Any,
) -> str:
    return tokens(settings, **over).mint(
        webhook_id=over.get("webhook_id", OPEN_WEBHOOK),
        delivery_id=42,
        depth=depth,
        read_patterns=read or ["*"],
        write_patterns=write if write is not None else ["*"],
        now=now,
        max_depth=max_depth,
    )


async def call(
    r: Running | System,
    method: str,
    path: str,
    token: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            f"{r.urls['importer']}{path}",
            headers=headers,
            json=body if raw is None else None,
            data=raw,
        ) as resp,
    ):
        text = await resp.text()
        try:
            return resp.status, await resp.json(content_type=None)
        except ValueError:
            return resp.status, text


async def push(r: Running | System, token: str, *changes: dict[str, Any]) -> tuple[int, Any]:
    return await call(r, "POST", "/api/notes", token, {"changes": list(changes)})


async def agent_graphql(
    r: Running | System, token: str | None, query: str, variables: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """POST {api_url}/graphql on the importer with the api_token as Bearer."""
    return await call(r, "POST", "/graphql", token, {"query": query, "variables": variables or {}})
