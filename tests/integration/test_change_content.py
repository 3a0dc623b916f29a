"""What a change delivery shows of note content (CONTRACT §11, §15), on the running
services with a real agent on loopback: never content outside the webhook's readPatterns
(the delivery's own token gets 403 there), and at most 1 MiB of content in one body —
through the change matcher and through triggerChangeWebhook alike.

Issue 37, findings 5 and 8: with includePatterns ["*"] and readPatterns ["pub/*"] a change
to secret/a.md was sent with its content; a triggerChangeWebhook of 40 × 1 MiB notes made
a 41.9 MB POST."""

from __future__ import annotations

import hashlib
from typing import Any

from tests.support.agent import Received
from tests.support.flows import create_api_key, create_change_webhook, finished, push_notes
from tests.support.inprocess import Running, eventually
from tests.support.system import System
from tests.support.token_api import call

MiB = 1 << 20
TRIGGER = """mutation($id: Int!, $paths: [String!]!) {
  triggerChangeWebhook(id: $id, paths: $paths) { deliveryId } }"""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def trigger_change(r: Running, admin: str, hook_id: int, paths: list[str]) -> int:
    status, body = await r.graphql(admin, TRIGGER, {"id": hook_id, "paths": paths})
    assert status == 200 and "errors" not in body, body
    return int(body["data"]["triggerChangeWebhook"]["deliveryId"])


async def test_content_outside_read_patterns_is_never_sent(system: System) -> None:
    hook_id, _ = await create_change_webhook(
        system,
        system.admin,
        system.agent.url,
        includePatterns=["*"],
        readPatterns=["pub/*"],
        passApiKey=True,
    )
    await push_notes(
        system, system.admin, ("secret/a.md", "the launch codes"), ("pub/b.md", "hello")
    )
    [fired] = await system.agent.wait_for(1)
    delivery_id = await trigger_change(system, system.admin, hook_id, ["secret/a.md", "pub/b.md"])
    [_, manual] = await system.agent.wait_for(2)
    assert manual.body["id"] == delivery_id

    for got, event in ((fired, "create"), (manual, "update")):
        assert got.body["changes"] == [
            {"path": "pub/b.md", "event": event, "version": 1,
             "content_hash": sha256("hello"), "content": "hello"},
            # path, event and version stay; nothing tells what the note holds
            {"path": "secret/a.md", "event": event, "version": 1,
             "content_hash": None, "content": None},
        ]  # fmt: skip
        assert b"launch codes" not in got.raw and sha256("the launch codes").encode() not in got.raw
        assert "content_truncated" not in got.body
        # What the payload leaves out is exactly what the delivery's own token may not read.
        token = got.body["api_token"]
        status, _ = await call(system, "GET", "/api/notes/secret/a.md", token)
        assert status == 403
        status, note = await call(system, "GET", "/api/notes/pub/b.md", token)
        assert status == 200 and note["content"] == "hello"


async def test_a_change_delivery_carries_at_most_1_mib_of_content(system: System) -> None:
    """Four notes in one batch, 3 × 400,000 bytes and a small one: the first two by path
    fit in 1 MiB; the third would pass it, so it and every later change carry null."""
    hook_id, _ = await create_change_webhook(
        system, system.admin, system.agent.url, includePatterns=["big/*"]
    )
    _, key = await create_api_key(system, system.admin, "bulk")
    big = {f"big/{n}.md": n * 400_000 for n in "abc"} | {"big/d.md": "small"}
    # One batch of 1.2 MB: through the token API (GraphQL bodies stop at 1 MiB).
    status, answer = await call(
        system,
        "POST",
        "/api/notes",
        body={"changes": [{"path": p, "content": c} for p, c in reversed(big.items())]},
        headers={"X-API-Key": key},
    )
    assert status == 200, answer
    [fired] = await system.agent.wait_for(1)

    async def projected() -> bool:  # admin-api's read model, which the trigger reads
        _, got = await system.graphql(system.admin, '{ notes(pattern: "big/*") { path } }')
        return len(got["data"]["notes"]) == len(big)

    await eventually(projected)
    await trigger_change(system, system.admin, hook_id, list(big))
    [_, manual] = await system.agent.wait_for(2)

    def shown(got: Received) -> list[tuple[str, Any, Any]]:
        return [(c["path"], c["content"], c["content_hash"]) for c in got.body["changes"]]

    for got in (fired, manual):
        assert shown(got) == [
            ("big/a.md", big["big/a.md"], sha256(big["big/a.md"])),
            ("big/b.md", big["big/b.md"], sha256(big["big/b.md"])),
            # past the cap: the content is left out, the hash still names the version
            ("big/c.md", None, sha256(big["big/c.md"])),
            ("big/d.md", None, sha256("small")),
        ]
        assert got.body["content_truncated"] is True
        assert len(got.raw) < 1.1 * MiB

    # The attempt log keeps the first 64 KiB of each ~1 MiB body (finding 8), a prefix of
    # what was sent, and says it is cut (CONTRACT §15).
    for got in (fired, manual):
        d = await finished(system, system.admin, got.body["id"])
        [attempt] = d["attempts"]
        assert attempt["requestBodyTruncated"] is True
        kept = attempt["requestBody"].encode()
        assert 65_536 - 4 < len(kept) <= 65_536
        assert got.raw.startswith(kept)
