"""Note apply rate through the token API (importer process): batches of 1 and of 100.

Each push is a real POST /api/notes with an api_token, checked and applied all or
nothing, with one `note.changed` per note; 8 clients push at once.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import aiohttp

from bench.common import table
from bench.harness import running_cluster
from cronhooks_common.tokens import ApiTokens

CLIENTS = 8
# A token is honoured only while its webhook exists and allows the paths (CONTRACT §15):
# the bench pushes as a real webhook that may write everywhere.
CREATE = """mutation($i: CreateCronWebhookInput!) { createCronWebhook(input: $i) { cronWebhook { id } } }"""
WRITER = {
    "url": "https://agent.example/hook",
    "cronSchedule": "0 0 1 1 *",
    "instruction": "bench: note apply rate",
    "readPatterns": ["*"],
    "writePatterns": ["*"],
}


async def _rate(
    session: aiohttp.ClientSession, url: str, token: str, batch: int, total: int, prefix: str
) -> float:
    pushes = total // batch
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(pushes):
        queue.put_nowait(i)

    async def client() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            changes = [
                {
                    "path": f"{prefix}/{i}/{j}.md",
                    "content": f"note {i}/{j}\n" * 20,
                    "expected_hash": "",
                }
                for j in range(batch)
            ]
            async with session.post(
                url, json={"changes": changes}, headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                assert resp.status == 200, await resp.text()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return pushes * batch / (time.perf_counter() - started)


async def apply_rate(
    sizes: tuple[tuple[int, int], ...] = ((1, 2_000), (100, 20_000)),
) -> list[tuple[str, str]]:
    """notes/s for each (changes per push, notes in all)."""
    async with running_cluster() as cluster, aiohttp.ClientSession() as session:
        created = await cluster.graphql(session, CREATE, {"i": WRITER})
        assert "errors" not in created, created
        webhook_id = int(created["data"]["createCronWebhook"]["cronWebhook"]["id"])
        token = ApiTokens(
            master_key=cluster.env["CRONHOOKS_SECRET_KEY"],
            issuer="http://127.0.0.1:8080",
            ttl_seconds=3600,
        ).mint(
            webhook_id=webhook_id,
            delivery_id=1,
            depth=1,
            read_patterns=["*"],
            write_patterns=["*"],
            now=datetime.now(UTC),
            max_depth=1,
        )
        url = f"{cluster.url('importer')}/api/notes"
        rows = []
        for batch, total in sizes:
            rate = await _rate(session, url, token, batch, total, f"b{batch}")
            rows.append([batch, total, CLIENTS, f"{rate:.0f}"])
    return [
        (
            "Note apply rate (token API, importer process)",
            table(["changes per push", "notes", "clients", "notes/s"], rows),
        )
    ]
