"""A running cronhooks (the four services as processes) and a recording agent, for benches."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

from bench.common import scratch_database

SERVICES = ("admin-api", "importer", "scheduler", "dispatcher")
MANAGEMENT = "http://127.0.0.1:15672/api"
AUTH = {"Authorization": aiohttp.encode_basic_auth("guest", "guest")}
LOGS = Path(__file__).parent / "results" / "logs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RecordingAgent:
    """Answers 200 at once and notes when each delivery id arrived (time.time())."""

    received: dict[int, list[float]] = field(default_factory=dict)
    port: int = 0
    _runner: web.AppRunner | None = None
    _count: int = 0
    _waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def start(self) -> RecordingAgent:
        async def hook(request: web.Request) -> web.Response:
            at = time.time()
            body = await request.json()
            self.received.setdefault(int(body["id"]), []).append(at)
            self._count += 1
            for n, fut in self._waiters:
                if self._count >= n and not fut.done():
                    fut.set_result(None)
            return web.Response(status=200)

        app = web.Application()
        app.router.add_post("/hook", hook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def wait_for(self, count: int, timeout: float) -> None:
        if self._count >= count:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((count, fut))
        await asyncio.wait_for(fut, timeout)

    def reset(self) -> None:
        self.received.clear()
        self._count = 0
        self._waiters.clear()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def process_name(service: str, replica: int) -> str:
    """`scheduler` for the first replica, `scheduler-2` for the second, and so on."""
    return service if replica == 0 else f"{service}-{replica + 1}"


@dataclass
class Cluster:
    env: dict[str, str]
    dsn: str
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    token: str = ""
    replicas: int = 1
    ports: dict[str, int] = field(default_factory=dict)  # process name → its HTTP port

    def url(self, service: str, replica: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[process_name(service, replica)]}"

    async def graphql(
        self,
        session: aiohttp.ClientSession,
        query: str,
        variables: dict[str, Any] | None = None,
        replica: int = 0,
    ) -> dict[str, Any]:
        async with session.post(
            f"{self.url('admin-api', replica)}/graphql",
            json={"query": query, "variables": variables or {}},
            headers={"Authorization": f"Bearer {self.token}"},
        ) as resp:
            return await resp.json()  # type: ignore[no-any-return]


async def _cli(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cronhooks_cli.cli",
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(err.decode())
    return out.decode()


def _port_variable(service: str) -> str:
    key = {"admin-api": "ADMIN"}.get(service, service.upper())
    return f"CRONHOOKS_{key}_PORT"


async def _start(cluster: Cluster, service: str, replica: int) -> None:
    """`cronhooks run <service>` on a port of its own (the only setting replicas differ in),
    logging to bench/results/logs/<process name>.log."""
    name = process_name(service, replica)
    port = cluster.ports.setdefault(name, free_port())
    # The file lives as long as the process; opening it is instant.
    log = open(LOGS / f"{name}.log", "ab")  # noqa: SIM115, ASYNC230
    cluster.procs[name] = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cronhooks_cli.cli",
        "run",
        service,
        env={**os.environ, **cluster.env, _port_variable(service): str(port)},
        stdout=log,
        stderr=log,
    )


async def _wait_ready(session: aiohttp.ClientSession, url: str) -> None:
    for _ in range(300):
        try:
            async with session.get(f"{url}/readyz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)


@asynccontextmanager
async def running_cluster(
    extra_env: dict[str, str] | None = None, replicas: int = 1
) -> AsyncIterator[Cluster]:
    """The four services as processes, `replicas` of each, against one scratch database
    and one fresh vhost."""
    vhost = f"cronhooks-bench-{uuid.uuid4().hex[:8]}"
    async with aiohttp.ClientSession(headers=AUTH) as mgmt:
        await mgmt.put(f"{MANAGEMENT}/vhosts/{quote(vhost, safe='')}")
        await mgmt.put(
            f"{MANAGEMENT}/permissions/{quote(vhost, safe='')}/guest",
            json={"configure": ".*", "write": ".*", "read": ".*"},
        )
    async with scratch_database() as dsn:
        # The first replica's ports are in env too, for the CLI and anything reading them.
        ports = {service: free_port() for service in SERVICES}
        env = {
            "CRONHOOKS_SECRET_KEY": "bench-secret-key-0123456789abcdef0123456789",
            "CRONHOOKS_DATABASE_URL": dsn,
            "CRONHOOKS_AMQP_URL": f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}",
            "CRONHOOKS_ALLOW_PRIVATE_TARGETS": "true",
            "CRONHOOKS_LOG_FORMAT": "json",
            **{_port_variable(service): str(port) for service, port in ports.items()},
            **(extra_env or {}),
        }
        cluster = Cluster(env, dsn, replicas=replicas, ports=dict(ports))
        LOGS.mkdir(parents=True, exist_ok=True)
        try:
            for replica in range(replicas):
                for service in SERVICES:
                    await _start(cluster, service, replica)
            async with aiohttp.ClientSession() as session:
                for name in cluster.procs:
                    await _wait_ready(session, f"http://127.0.0.1:{cluster.ports[name]}")
            cluster.token = (await _cli(env, "admin", "create-token", "--name", "bench")).split()[
                -1
            ]
            yield cluster
        finally:
            for proc in cluster.procs.values():
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in cluster.procs.values():
                try:
                    await asyncio.wait_for(proc.wait(), 40)
                except TimeoutError:
                    proc.kill()
            async with aiohttp.ClientSession(headers=AUTH) as mgmt:
                await mgmt.delete(f"{MANAGEMENT}/vhosts/{quote(vhost, safe='')}")
