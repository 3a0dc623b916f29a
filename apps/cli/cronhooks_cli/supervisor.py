"""`cronhooks up`: migrate, then run every service as a child process and keep it running.

For local use. Ports another process listens on (a second clone's `make up` while the
first runs) end it before anything starts, in one line (ports.py). A child that exits is
restarted (with backoff), unless it exits with a configuration error (a wrong
CRONHOOKS_SECRET_KEY, queues that do not fit): then every child is stopped and `up` ends
with which service failed and its line. SIGINT/SIGTERM stop the children with SIGTERM
(they drain) and wait for them. With a log file (`make up` names one), migrations, the
services' logs and its own go there, so the terminal keeps only the quick start, which
comes last, or the lines saying why a service stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from cronhooks_cli import ports
from cronhooks_cli.quick_start import (
    QuickStartError,
    ensure_demo_webhook,
    quick_start_text,
    quick_start_token,
)
from cronhooks_common.migrate import migrate
from cronhooks_common.settings import Settings

log = structlog.get_logger(__name__)

SERVICE_NAMES = ("admin-api", "importer", "scheduler", "dispatcher")
# What the demo agent received, kept beside .env so /received survives a restart.
DEMO_RECEIVED = Path(".cronhooks-demo-received.json")
CONFIGURATION_ERROR = 2  # the exit status of `cronhooks` for a setting that cannot work
FAILURE_GRACE_SECONDS = 10.0
_TAIL = 4096  # bytes of a child's stderr kept: its last line says why it stopped


def _loopback(bind: str) -> str:
    """Where this process reaches a port bound to `bind` (0.0.0.0: any address)."""
    return "127.0.0.1" if bind in ("0.0.0.0", "") else bind


def _demo_agent_secret(settings: Settings) -> str:
    from cronhooks_agent.demo import demo_secret

    return os.environ.get("DEMO_AGENT_SECRET") or demo_secret(settings.secret_key)


async def _child(
    argv: list[str], env: dict[str, str], stop: asyncio.Event, output: int | None = None
) -> str | None:
    """Run `argv` until `stop`, restarting it when it exits; but a child that exits with a
    configuration error is not restarted: its last line on stderr (why) is returned. Its
    stderr is copied to ours (the log file, with one), its stdout goes to `output`."""
    delay = 0.5
    while not stop.is_set():
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=output, stderr=asyncio.subprocess.PIPE
        )
        assert proc.stderr is not None
        last = asyncio.ensure_future(_forward(proc.stderr))
        waiter = asyncio.ensure_future(proc.wait())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(35):  # not wait_for (clock.wait_set)
                        await waiter
                except TimeoutError:
                    proc.kill()
            await last
            return _why(proc.returncode, last.result())
        stopper.cancel()
        if proc.returncode == CONFIGURATION_ERROR:  # the same settings fail the same way
            log.error("child_misconfigured", argv=argv[-1], code=proc.returncode)
            return _why(proc.returncode, await last)
        await last
        log.warning("child_exited", argv=argv[-1], code=proc.returncode, restart_in=delay)
        await asyncio.sleep(delay)
        delay = 0.5 if time.monotonic() - started > 30 else min(delay * 2, 10.0)
    return None


def _why(code: int | None, last_line: str) -> str | None:
    """Why a child stopped for good: its last line, when it exited with a configuration
    error (a child stopped by us says nothing)."""
    return (last_line or "configuration error") if code == CONFIGURATION_ERROR else None


async def _forward(stream: asyncio.StreamReader) -> str:
    """Copy a child's stderr to ours as it comes; its last non-empty line."""
    tail = b""
    while chunk := await stream.read(1 << 16):
        sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.flush()
        tail = (tail + chunk)[-_TAIL:]
    lines = [line.strip() for line in tail.decode(errors="replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")


async def _wait_ready(url: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return True
            await asyncio.sleep(0.3)
    return False


def _log_to(path: Path) -> int:
    """Send this process's log lines (stderr) to `path`, appended; return its descriptor
    for the children's output."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stderr.flush()
    os.dup2(fd, 2)
    return fd


async def up(
    settings: Settings,
    *,
    demo_agent_port: int | None,
    print_token: bool,
    log_file: Path | None = None,
) -> int:
    busy = ports.taken(settings.bind, ports.wanted(settings, demo_agent_port))
    if busy:
        print(ports.taken_line(settings.bind, busy), file=sys.stderr, flush=True)
        return CONFIGURATION_ERROR
    output = None
    if log_file is not None:
        print(f"cronhooks up: migrations and service logs go to {log_file}", flush=True)
        output = _log_to(log_file)
    await migrate(settings.database_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    env = {**os.environ, **settings.to_env()}
    exe = [sys.executable, "-m", "cronhooks_cli.cli"]
    children = {
        name: asyncio.create_task(_child([*exe, "run", name], env, stop, output))
        for name in SERVICE_NAMES
    }
    demo = None
    if demo_agent_port is not None:
        from cronhooks_agent import demo as demo_agent

        demo = await demo_agent.serve(
            settings.bind, demo_agent_port, _demo_agent_secret(settings), DEMO_RECEIVED
        )
    host = f"http://{_loopback(settings.bind)}"
    ready = asyncio.ensure_future(
        asyncio.gather(
            *(_wait_ready(f"{host}:{settings.port_of(n)}/readyz") for n in SERVICE_NAMES)
        )
    )
    # A child that stops for good (a configuration error) ends the wait: all would not be ready.
    watched: list[asyncio.Future[Any]] = [ready, *children.values()]
    await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        ready.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ready
    elif not all(ready.result()):
        log.error("services_not_ready")
        if log_file is not None:
            print(f"cronhooks up: a service is not ready after 60 s; see {log_file}", flush=True)
    elif print_token:
        await _print_quick_start(settings, demo_agent_port, log_file)
    watched = [asyncio.ensure_future(stop.wait()), *children.values()]
    await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    if not stop.is_set():
        # One child stopped for good; the others, given the same settings, likely will
        # too: a moment for them to say so, then they are stopped.
        await asyncio.wait(children.values(), timeout=FAILURE_GRACE_SECONDS)
        stop.set()
    reasons = dict(zip(children, await asyncio.gather(*children.values()), strict=True))
    if demo is not None:
        await demo.cleanup()
    failed = {name: why for name, why in reasons.items() if why is not None}
    for line in _failure_lines(failed):
        print(line, file=sys.stderr, flush=True)
        if log_file is not None:  # stderr is the log file: the terminal hears it too
            print(line, flush=True)
    return CONFIGURATION_ERROR if failed else 0


def _failure_lines(failed: dict[str, str]) -> list[str]:
    """`cronhooks up: admin-api, importer stopped: <why>`, one line per distinct reason.
    A service's line starts with `cronhooks <service>: `, which the list of names says."""
    by_reason: dict[str, list[str]] = {}
    for name, why in failed.items():
        by_reason.setdefault(why.removeprefix(f"cronhooks {name}: "), []).append(name)
    return [f"cronhooks up: {', '.join(names)} stopped: {why}" for why, names in by_reason.items()]


async def _print_quick_start(
    settings: Settings, demo_agent_port: int | None, log_file: Path | None
) -> None:
    token = await quick_start_token(settings)
    agent_url = secret = None
    demo = None
    if demo_agent_port is not None:
        agent_url = f"http://{_loopback(settings.bind)}:{demo_agent_port}/webhook"
        secret = _demo_agent_secret(settings)
        graphql = f"http://{_loopback(settings.bind)}:{settings.admin_port}/graphql"
        try:
            demo = await ensure_demo_webhook(graphql, token, agent_url=agent_url, secret=secret)
        except (QuickStartError, aiohttp.ClientError) as exc:
            log.error("demo_webhook_failed", error=str(exc))
    text = quick_start_text(
        settings,
        token=token,
        agent_url=agent_url,
        agent_secret=secret,
        demo=demo,
        log_file=log_file,
    )
    print(text, flush=True)
