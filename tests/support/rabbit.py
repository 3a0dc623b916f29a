"""Isolated RabbitMQ vhosts for tests (management HTTP API, rabbitmqctl as a fallback)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from urllib.parse import quote

import aiohttp

MANAGEMENT = "http://127.0.0.1:15672/api"
AUTH = {"Authorization": aiohttp.encode_basic_auth("guest", "guest")}


async def _management_available(api: str) -> bool:
    try:
        async with (
            aiohttp.ClientSession(headers=AUTH) as session,
            session.get(f"{api}/overview", timeout=aiohttp.ClientTimeout(3)) as r,
        ):
            return r.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


def _shared_node(api: str) -> None:
    # rabbitmqctl without a node name reaches the machine's node only.
    assert api == MANAGEMENT, f"the management API {api} does not answer"


async def create_vhost(name: str, api: str = MANAGEMENT) -> None:
    """Create vhost `name` through the management API `api` (the machine's node by
    default; rabbitmqctl there if its management plugin is off)."""
    if await _management_available(api):
        async with aiohttp.ClientSession(headers=AUTH) as session:
            async with session.put(f"{api}/vhosts/{quote(name, safe='')}") as r:
                assert r.status in (201, 204), await r.text()
            async with session.put(
                f"{api}/permissions/{quote(name, safe='')}/guest",
                json={"configure": ".*", "write": ".*", "read": ".*"},
            ) as r:
                assert r.status in (201, 204), await r.text()
        return
    _shared_node(api)
    ctl = shutil.which("rabbitmqctl") or "rabbitmqctl"
    await asyncio.to_thread(
        subprocess.run, [ctl, "add_vhost", name], check=True, capture_output=True
    )
    await asyncio.to_thread(
        subprocess.run,
        [ctl, "set_permissions", "-p", name, "guest", ".*", ".*", ".*"],
        check=True,
        capture_output=True,
    )


async def delete_vhost(name: str, api: str = MANAGEMENT) -> None:
    if await _management_available(api):
        async with (
            aiohttp.ClientSession(headers=AUTH) as session,
            session.delete(f"{api}/vhosts/{quote(name, safe='')}"),
        ):
            return
    _shared_node(api)
    ctl = shutil.which("rabbitmqctl") or "rabbitmqctl"
    await asyncio.to_thread(subprocess.run, [ctl, "delete_vhost", name], capture_output=True)


async def close_connections(vhost: str, name_prefix: str = "", wait: float = 15.0) -> int:
    """Force-close client connections of `vhost` (simulates losing the broker).

    The management API lists a new connection only after its next stats tick, so this
    polls for up to `wait` seconds until at least one matching connection shows up.
    """
    deadline = asyncio.get_running_loop().time() + wait
    async with aiohttp.ClientSession(headers=AUTH) as session:
        while True:
            async with session.get(f"{MANAGEMENT}/vhosts/{quote(vhost, safe='')}/connections") as r:
                conns = await r.json()
            matching = [
                c
                for c in conns
                if (c.get("client_properties") or {})
                .get("connection_name", "")
                .startswith(name_prefix)
            ]
            if matching or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.25)
        for conn in matching:
            async with session.delete(f"{MANAGEMENT}/connections/{quote(conn['name'], safe='')}"):
                pass
    return len(matching)


async def queue_depth(vhost: str, queue: str) -> int:
    async with (
        aiohttp.ClientSession(headers=AUTH) as session,
        session.get(f"{MANAGEMENT}/queues/{quote(vhost, safe='')}/{quote(queue, safe='')}") as r,
    ):
        if r.status != 200:
            return 0
        return int((await r.json()).get("messages", 0))


async def dead_letters(amqp_url: str, consumer: str) -> int:
    """Messages parked in a consumer's dead-letter queue, counted live by a passive
    declare (the management API's figures lag)."""
    from cronhooks_common import broker

    amqp = await broker.connect(amqp_url, name="dead-letter-check")
    try:
        channel = await amqp.channel()
        queue = await channel.declare_queue(f"cronhooks.{consumer}.dead", passive=True)
        return int(queue.declaration_result.message_count or 0)
    finally:
        await amqp.close()
