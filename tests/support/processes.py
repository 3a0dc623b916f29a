"""Start the real services as processes (`cronhooks run …`) for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from cronhooks_common.settings import Settings

SERVICES = ("admin-api", "importer", "scheduler", "dispatcher")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Under `pytest -n` each worker writes its services' logs to its own files: two workers'
# admin-api in one file would mix what a test reads back (test_no_secrets_in_logs).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def service_log(name: str) -> Path:
    """The log file of a service process named `name` (test-artifacts/[gwN-]NAME.log)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / (f"{_WORKER}-{name}.log" if _WORKER else f"{name}.log")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_free_ports(settings: Settings) -> dict[str, str]:
    env = settings.to_env()
    ports = {name: free_port() for name in ("ADMIN", "IMPORTER", "SCHEDULER", "DISPATCHER")}
    for name, port in ports.items():
        env[f"CRONHOOKS_{name}_PORT"] = str(port)
    env["CRONHOOKS_PUBLIC_URL"] = f"http://127.0.0.1:{ports['ADMIN']}"
    env["CRONHOOKS_API_PUBLIC_URL"] = f"http://127.0.0.1:{ports['IMPORTER']}"
    return env


async def cli(
    settings: Settings | Mapping[str, str], *args: str, timeout: float | None = None
) -> tuple[int, str, str]:
    """`cronhooks ARGS` in a process of its own, the settings in its environment: its exit
    code, what it printed and what it logged."""
    env = settings.to_env() if isinstance(settings, Settings) else settings
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cronhooks_cli.cli",
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def up_until_it_stops(
    env: Mapping[str, str], cwd: Path, *args: str, timeout: float = 30
) -> tuple[int, str, str]:
    """`cronhooks up ARGS` with exactly `env`, in `cwd` (its log file and state files go
    there), run until it stops by itself (a configuration error): its exit code, what it
    printed and what it logged."""
    proc = await asyncio.create_subprocess_exec(
        Path(sys.executable).parent / "cronhooks",
        "up",
        *args,
        env=dict(env),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def cli_ok(settings: Settings | Mapping[str, str], *args: str) -> str:
    """What `cronhooks ARGS` printed; it must succeed."""
    code, out, err = await cli(settings, *args)
    assert code == 0, err
    return out


def _port_variable(service: str) -> str:
    """The setting of a service's HTTP port (admin-api's is CRONHOOKS_ADMIN_PORT)."""
    key = "ADMIN" if service == "admin-api" else service.upper()
    return f"CRONHOOKS_{key}_PORT"


@dataclass
class Cluster:
    env: dict[str, str]
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.env[_port_variable(service)]}"

    async def cli(self, *args: str) -> str:
        return await cli_ok(self.env, *args)

    async def start(
        self, service: str, *, name: str | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`cronhooks run <service>` as `name` (default: the service; another name runs
        a further replica), logging to its `service_log`."""
        name = name or service
        # The file lives as long as the process; opening it is instant.
        log = open(service_log(name), "ab")  # noqa: SIM115, ASYNC230
        self.procs[name] = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cronhooks_cli.cli",
            "run",
            service,
            env={**os.environ, **self.env, **(env or {})},
            stdout=log,
            stderr=log,
        )

    async def admin_token(self, name: str = "test") -> str:
        """A new admin token, made as an operator makes one (`cronhooks admin create-token`)."""
        return (await self.cli("admin", "create-token", "--name", name)).strip().splitlines()[-1]

    async def graphql(
        self, token: str, query: str, variables: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{self.url('admin-api')}/graphql",
                json={"query": query, "variables": variables or {}},
                headers={"Authorization": f"Bearer {token}"},
            ) as resp,
        ):
            return await resp.json()  # type: ignore[no-any-return]

    async def start_replica(self, service: str, name: str) -> None:
        """A further process of `service`, as `name`, on a free port of its own."""
        await self.start(service, name=name, env={_port_variable(service): str(free_port())})

    async def wait_ready(self, service: str, timeout: float = 30) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        async with aiohttp.ClientSession() as session:
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(f"{self.url(service)}/readyz") as resp:
                        if resp.status == 200:
                            return
                if self.procs[service].returncode is not None:
                    raise AssertionError(f"{service} exited with {self.procs[service].returncode}")
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"{service} not ready within {timeout}s")
                await asyncio.sleep(0.1)

    async def stop(self, service: str, sig: int = signal.SIGTERM) -> int:
        proc = self.procs.pop(service)
        if proc.returncode is None:
            proc.send_signal(sig)
        try:
            return await asyncio.wait_for(proc.wait(), 40)
        except TimeoutError:
            proc.kill()
            return await proc.wait()


@contextlib.asynccontextmanager
async def cluster(
    settings: Settings, services: tuple[str, ...] = SERVICES
) -> AsyncIterator[Cluster]:
    c = Cluster(with_free_ports(settings))
    try:
        for service in services:
            await c.start(service)
        for service in services:
            await c.wait_ready(service)
        yield c
    finally:
        for service in list(c.procs):
            await c.stop(service)
