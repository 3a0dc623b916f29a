"""What every service process shares: the runtime it is wired from, and its life cycle.

A service module provides ``bootstrap(runtime) -> Service``; `run_service` checks the
secret key against the database (secret_probe.py), builds the real runtime (pool, broker
connection, clock, HTTP app), starts the outbox relay, serves HTTP,
and on SIGTERM drains: stop taking work, finish in-flight work within 30 s, exit 0.
Tests build a `Runtime` themselves and call the same ``bootstrap``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg
import structlog
from aio_pika.abc import AbstractRobustConnection
from aiohttp import web

from cronhooks_common import broker, db
from cronhooks_common.clock import Clock, SystemClock
from cronhooks_common.crypto import SecretBox
from cronhooks_common.http_limits import make_runner
from cronhooks_common.ops import add_ops_routes
from cronhooks_common.relay import OutboxRelay
from cronhooks_common.secret_probe import check_secret_key
from cronhooks_common.settings import Settings

log = structlog.get_logger(__name__)

DRAIN_SECONDS = 30.0
RELAY_DEFER_SECONDS = 2.0  # a deferring relay's wait before each try for the lead


@dataclass
class Runtime:
    """The adapters a service is built from."""

    name: str
    settings: Settings
    pool: asyncpg.Pool
    amqp: AbstractRobustConnection
    clock: Clock = field(default_factory=SystemClock)
    # Large enough for the token API's biggest batch; each handler applies its own limits.
    http: web.Application = field(default_factory=lambda: web.Application(client_max_size=32 << 20))


class Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Stop taking new work and finish what is in hand."""


Bootstrap = Callable[[Runtime], Awaitable[Service]]


async def serve(
    name: str, settings: Settings, bootstrap: Bootstrap, *, defer_relay: bool = False
) -> None:
    """Run one service until SIGTERM/SIGINT, then drain and return. `defer_relay`: this
    process's relay leads only when no other kind of process's can (relay.py)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    pool = await db.create_pool(settings.database_url, name=name, max_size=20)
    try:
        # Before the broker: a wrong key stops the process having taken no message.
        async with pool.acquire() as conn:
            await check_secret_key(conn, SecretBox.of(settings), settings.database_url)
    except BaseException:
        await pool.close()
        raise
    amqp = await broker.connect(settings.amqp_url, name=name)
    runtime = Runtime(name=name, settings=settings, pool=pool, amqp=amqp)
    add_ops_routes(runtime.http, pool=pool, amqp=amqp)
    relay = asyncio.create_task(
        OutboxRelay(
            dsn=settings.database_url,
            amqp=amqp,
            name=name,
            defer_seconds=RELAY_DEFER_SECONDS if defer_relay else 0.0,
        ).run()
    )
    try:
        service = await bootstrap(runtime)
        await service.start()
    except Exception:
        # Close what is open, so the error that stops the service is all that is shown
        # (not the broker connection's own tasks failing as the loop shuts down).
        await _release(relay, amqp, pool)
        raise
    tune_gc()
    runner = make_runner(runtime.http, shutdown_timeout=DRAIN_SECONDS)
    await runner.setup()
    await web.TCPSite(runner, settings.bind, settings.port_of(name)).start()
    log.info("service_started", port=settings.port_of(name))

    await stop.wait()
    log.info("service_draining")
    await runner.cleanup()  # no new requests; in-flight ones finish first
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            await service.stop()
    except TimeoutError:
        log.warning("drain_timeout")
    await _release(relay, amqp, pool)
    log.info("service_stopped")


GC_GEN0_THRESHOLD = 20_000  # allocations between young collections (CPython's default: 700)


def tune_gc() -> None:
    """Once the service is up: what start-up built (modules, pools, caches) lives as long as
    the process, so it leaves the collector's generations for good (`gc.freeze`), and the
    young generation is collected after 20,000 allocations. A burst allocates a few
    objects per message, almost none in cycles: with the defaults the collector ran every
    few messages and walked the whole heap at each full collection, 6 % of the
    dispatcher's CPU in a 10,000 herd (perf; ~0 after, docs/architecture.md)."""
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 20)


async def _release(
    relay: asyncio.Task[None], amqp: AbstractRobustConnection, pool: asyncpg.Pool
) -> None:
    relay.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await relay
    await amqp.close()
    await pool.close()
