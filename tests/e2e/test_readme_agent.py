"""The README's "agent in 20 lines", run as written (on another port): it answers a signed
delivery with its note and refuses a wrongly signed one."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

import aiohttp

from cronhooks_common.signing import SecretKeys, generate_secret, signature_headers
from tests.support.processes import free_port

README = Path(__file__).resolve().parents[2] / "README.md"


async def test_the_readme_agent_answers_a_signed_delivery(tmp_path: Path) -> None:
    [code] = re.findall(r"## An agent in 20 lines.*?```python\n(.*?)```", README.read_text(), re.S)
    port = free_port()
    assert "port=8091" in code
    script = tmp_path / "agent.py"
    script.write_text(code.replace("port=8091", f"port={port}"))
    secret = generate_secret()
    agent = await asyncio.create_subprocess_exec(
        sys.executable, str(script), env={**os.environ, "WEBHOOK_SECRET": secret}
    )
    body = json.dumps({"version": 1, "id": 42, "instruction": "Summarise the day"}).encode()

    def headers(key: str) -> dict[str, str]:
        return signature_headers(
            SecretKeys.of(key), delivery_id="42", timestamp=int(time.time()), body=body, attempt=1
        )

    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/webhook"
            for _ in range(100):  # until it listens
                try:
                    async with session.post(url, data=body, headers=headers(secret)) as resp:
                        status, answer = resp.status, await resp.json()
                    break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError("the README agent did not start listening")
            assert status == 200
            assert answer["status"] == "ok"
            [change] = answer["changes"]
            assert change["path"] == "digests/42.md"
            assert "Summarise the day" in change["content"]
            async with session.post(url, data=body, headers=headers(generate_secret())) as resp:
                assert resp.status == 401
    finally:
        agent.terminate()
        await agent.wait()
