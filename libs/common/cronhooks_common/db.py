"""asyncpg pools and the errors worth retrying."""

from __future__ import annotations

import asyncio

import asyncpg
import structlog

from cronhooks_common import jsonfast

log = structlog.get_logger(__name__)

# Errors after which the same work may succeed if tried again: the database went away,
# restarted, or chose this transaction as a victim.
TRANSIENT_DB_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ConnectionError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.SerializationError,
    asyncpg.DeadlockDetectedError,
    # asyncpg's own state errors on a connection that broke mid-operation (seen when
    # Postgres restarts under load: "cannot switch to state …").
    asyncpg.InternalClientError,
)


APPLICATION_PREFIX = "cronhooks-"  # every session's application_name: cronhooks-<name>


def server_settings(name: str) -> dict[str, str]:
    """Session settings of every connection a service opens.

    JIT is off: it pays only for long analytic queries, and ours are short. Its cost
    threshold is met by estimates alone, which are wild for partitions not analyzed yet
    (a delivery bucket opened a minute ago): in a 10,000 herd, auto_explain showed the
    projector's live-tail read, 0.2 ms of execution, spending 30-90 ms compiling
    expressions on each call and up to 1.3 s when the estimate crossed the
    inlining/optimization threshold as well."""
    return {"application_name": f"{APPLICATION_PREFIX}{name}", "jit": "off"}


async def _init_connection(conn: asyncpg.Connection) -> None:
    for kind in ("jsonb", "json"):
        await conn.set_type_codec(
            kind, encoder=jsonfast.dumps, decoder=jsonfast.loads, schema="pg_catalog"
        )


async def _reset_cheaply(conn: asyncpg.Connection) -> None:
    """Pool release hook. asyncpg's default reset sends RESET ALL / UNLISTEN / advisory
    unlock on every release (a round trip each time). Pool connections never hold session
    state here (LISTEN and advisory locks use dedicated connections), so only an
    unfinished transaction needs undoing."""
    if conn.is_in_transaction():
        await conn.execute("rollback")


async def create_pool(
    dsn: str, *, name: str, min_size: int = 2, max_size: int = 10, wait: bool = True
) -> asyncpg.Pool:
    """A pool with JSON codecs; with `wait`, retries until the database answers."""
    delay = 0.2
    while True:
        try:
            pool: asyncpg.Pool = await asyncpg.create_pool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                init=_init_connection,
                reset=_reset_cheaply,
                server_settings=server_settings(name),
                command_timeout=60,
            )
            return pool
        except TRANSIENT_DB_ERRORS as exc:
            if not wait:
                raise
            log.warning("database_unavailable", error=str(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def connect(dsn: str, *, name: str) -> asyncpg.Connection:
    """A single connection with the same codecs as the pools (for LISTEN and advisory locks)."""
    conn: asyncpg.Connection = await asyncpg.connect(dsn, server_settings=server_settings(name))
    await _init_connection(conn)
    return conn


async def wake_on_notify(dsn: str, channel: str, wake: asyncio.Event, *, name: str) -> None:
    """LISTEN on `channel` forever (until cancelled), setting `wake` on every notification.
    Also set when (re)connected: anything may have happened while nobody listened, so the
    waiter looks once. Reconnects after the database goes away."""
    while True:
        try:
            conn = await connect(dsn, name=name)
        except TRANSIENT_DB_ERRORS:
            await asyncio.sleep(0.5)
            continue
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _, lost=lost: lost.set())
        try:
            await conn.add_listener(channel, lambda *_: wake.set())
            wake.set()
            await lost.wait()
        except TRANSIENT_DB_ERRORS:
            pass
        finally:
            conn.terminate()
        log.warning("listener_lost", channel=channel, listener=name)
