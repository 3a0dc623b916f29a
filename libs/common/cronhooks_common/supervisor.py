"""`cronhooks up`: migrate, then run every service as a child process and keep it running.

For local use. A child that exits is restarted (with backoff); SIGINT/SIGTERM stop the
children with SIGTERM (they drain) and wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import structlog

from cronhooks_common.migrate import migrate
from cronhooks_common.settings import Settings

log = structlog.get_logger(__name__)

SERVICE_NAMES = ("admin-api", "importer", "scheduler", "dispatcher")
CONFIGURATION_ERROR = 2  # the exit status of `cronhooks` for a setting that cannot work


async def _child(argv: list[str], env: dict[str, str], stop: asyncio.Event) -> None:
    delay = 0.5
    while not stop.is_set():
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(*argv, env=env)
        waiter = asyncio.ensure_future(proc.wait())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(waiter, 35)
                except TimeoutError:
                    proc.kill()
            return
        stopper.cancel()
        if proc.returncode == CONFIGURATION_ERROR:  # the same settings fail the same way
            log.error("child_misconfigured", argv=argv[-1], code=proc.returncode)
            return
        log.warning("child_exited", argv=argv[-1], code=proc.returncode, restart_in=delay)
        await asyncio.sleep(delay)
        delay = 0.5 if time.monotonic() - started > 30 else min(delay * 2, 10.0)


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


async def up(settings: Settings, *, demo_agent_port: int | None, print_token: bool) -> int:
    await migrate(settings.database_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    env = {**os.environ, **settings.to_env()}
    exe = [sys.executable, "-m", "cronhooks_common.cli"]
    children = [
        asyncio.create_task(_child([*exe, "run", name], env, stop)) for name in SERVICE_NAMES
    ]
    demo = None
    if demo_agent_port is not None:
        from cronhooks_agent import demo as demo_agent

        demo = await demo_agent.serve(settings.bind, demo_agent_port)
    host = f"http://{settings.bind}"
    ready = all(
        await asyncio.gather(
            *(_wait_ready(f"{host}:{settings.port_of(n)}/readyz") for n in SERVICE_NAMES)
        )
    )
    if not ready:
        log.error("services_not_ready")
    if print_token and ready:
        await _print_quick_start(settings, demo_agent_port)
    await stop.wait()
    await asyncio.gather(*children)
    if demo is not None:
        await demo.cleanup()
    return 0


# `make up` keeps the admin token it made here (mode 0600, beside .env) and reuses it while
# it is live, instead of minting another non-expiring token at every start.
TOKEN_FILE = Path(".cronhooks-admin-token")


async def quick_start_token(settings: Settings, path: Path = TOKEN_FILE) -> str:
    """The token of earlier `make up` runs if it is still live, else a new one (saved)."""
    import asyncpg

    from cronhooks_admin.auth import create_token, token_is_live

    saved = _saved_token(path)
    conn = await asyncpg.connect(settings.database_url)
    try:
        if saved and await token_is_live(conn, saved, now=datetime.now(UTC)):
            return saved
        token = await create_token(conn, "make-up")
    finally:
        await conn.close()
    _save_token(path, token)
    return token


def _saved_token(path: Path) -> str:
    return path.read_text().strip() if path.is_file() else ""


def _save_token(path: Path, token: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    os.chmod(path, 0o600)  # also when the file was there before with wider permissions


async def _print_quick_start(settings: Settings, demo_agent_port: int | None) -> None:
    token = await quick_start_token(settings)
    graphql = f"{settings.public_url}/graphql"
    agent = (
        f"http://{settings.bind}:{demo_agent_port}/webhook"
        if demo_agent_port
        else "https://agent.example/webhook"
    )
    mutation = (
        'mutation { createCronWebhook(input: {url: \\"' + agent + '\\", '
        'cronSchedule: \\"*/5 * * * *\\", instruction: \\"Write a digest of the last day\\", '
        # The demo agent answers with a note under demo/: let the webhook write there.
        'writePatterns: [\\"demo/*\\"]}) '
        "{ cronWebhook { id nextRunAt } secret } }"
    )
    trigger = "mutation { triggerCronWebhook(webhookId: 1) { deliveryId } }"
    lines = [
        "",
        "cronhooks is up.",
        f"  GraphQL (explorer in a browser): {graphql}",
        f"  Admin web page:                  {settings.public_url}/",
        f"  Agent token API:                 {settings.api_public_url}",
        f"  Demo agent:                      {agent}" if demo_agent_port else "",
        f"  Admin token:                     {token}",
        "",
        "Create a webhook for the demo agent:",
        f"  curl -s {graphql} -H 'Authorization: Bearer {token}' "
        f"-H 'Content-Type: application/json' -d '{{\"query\": \"{mutation}\"}}'",
        "Run it now (use the id printed above):",
        f"  curl -s {graphql} -H 'Authorization: Bearer {token}' "
        f"-H 'Content-Type: application/json' -d '{{\"query\": \"{trigger}\"}}'",
        "",
    ]
    print("\n".join(line for line in lines if line is not None), flush=True)
