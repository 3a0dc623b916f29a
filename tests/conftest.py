"""Shared fixtures: a migrated template database, a fresh database and vhost per test,
and the services running on them (`system`).

Everything talks to the real Postgres and RabbitMQ on 127.0.0.1. The template is
migrated once per session; each test gets `CREATE DATABASE … TEMPLATE` (fast) and its own
vhost, so tests never see each other's rows, queues or messages. Which servers: the
`pg_server`, `amqp_server` and `rabbit_api` fixtures; the fault suite, which restarts
them, overrides them with private ones (tests/faults/conftest.py).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from urllib.parse import quote

import asyncpg
import orjson
import pytest

from cronhooks_common import broker, db, eventstore
from cronhooks_common.clock import ManualClock
from cronhooks_common.events import Event
from cronhooks_common.migrate import migrate
from cronhooks_common.relay import OutboxRelay
from cronhooks_common.settings import Settings
from tests.support import asyncapi, event_samples, rabbit
from tests.support.agent import Agent
from tests.support.system import System, marked_options, start_system

PG_SERVER = os.environ.get("CRONHOOKS_TEST_PG", "postgresql://127.0.0.1:5432")
AMQP_SERVER = "amqp://guest:guest@127.0.0.1:5672"
SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"
RUN_ID = uuid.uuid4().hex[:8]


def dsn_for(name: str, server: str = PG_SERVER) -> str:
    return f"{server}/{name}"


async def _drop_database(name: str, server: str = PG_SERVER) -> None:
    admin = await asyncpg.connect(dsn_for("postgres", server))
    try:
        await admin.execute(f'drop database if exists "{name}" with (force)')
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The Postgres server of the tests' databases (a URL without a database)."""
    return PG_SERVER


@pytest.fixture(scope="session")
def amqp_server() -> str:
    """The RabbitMQ server of the tests' vhosts (a URL without a vhost)."""
    return AMQP_SERVER


@pytest.fixture(scope="session")
def rabbit_api() -> str:
    """That server's management API."""
    return rabbit.MANAGEMENT


@asynccontextmanager
async def migrated_template(server: str) -> AsyncIterator[str]:
    """The body of `template_db` (a fixture overriding `pg_server` overrides it too: a
    session fixture is kept per definition, not per server)."""
    name = f"cronhooks_test_{RUN_ID}_tpl"
    await migrate(dsn_for(name, server))
    yield name
    await _drop_database(name, server)


@pytest.fixture(scope="session")
async def template_db(pg_server: str) -> AsyncIterator[str]:
    async with migrated_template(pg_server) as name:
        yield name


@pytest.fixture
async def database_url(pg_server: str, template_db: str) -> AsyncIterator[str]:
    name = f"cronhooks_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(dsn_for("postgres", pg_server))
    try:
        await admin.execute(f'create database "{name}" template "{template_db}"')
    finally:
        await admin.close()
    yield dsn_for(name, pg_server)
    try:
        await _check_events_against_asyncapi(dsn_for(name, pg_server))
    finally:
        await _drop_database(name, pg_server)


# Events of test fixtures themselves (relay and consumer tests), not of the services.
TEST_EVENT_PREFIXES = ("test.",)


async def _check_events_against_asyncapi(dsn: str) -> None:
    """Every event the services emitted in this test matches docs/asyncapi.yaml and its class."""
    conn = await db.connect(dsn, name="asyncapi-check")
    try:
        rows = await conn.fetch(f"select {eventstore.EVENT_COLUMNS} from eventstore.events")
    finally:
        await conn.close()
    for row in rows:
        event = eventstore.event_from_row(row)
        if not event.type.startswith(TEST_EVENT_PREFIXES):
            asyncapi.validate(event.to_json())
            _check_event_class(event)
            event_samples.record(event)


def _check_event_class(event: Event) -> None:
    """The event's data is exactly what its class writes: the typed events lose nothing
    the services wrote, and add nothing (every event of the whole suite is a wire test)."""
    written = event.payload.to_data()
    assert orjson.dumps(written, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        event.data, option=orjson.OPT_SORT_KEYS
    ), f"{event.type} data changes through its class: {event.data} -> {written}"


@pytest.fixture
async def vhost(rabbit_api: str) -> AsyncIterator[str]:
    name = f"cronhooks-test-{RUN_ID}-{uuid.uuid4().hex[:8]}"
    await rabbit.create_vhost(name, api=rabbit_api)
    yield name
    await rabbit.delete_vhost(name, api=rabbit_api)


@pytest.fixture
def amqp_url(amqp_server: str, vhost: str) -> str:
    return f"{amqp_server}/{quote(vhost, safe='')}"


@pytest.fixture
def settings(database_url: str, amqp_url: str) -> Settings:
    return Settings.from_mapping(
        {
            "CRONHOOKS_SECRET_KEY": SECRET_KEY,
            "CRONHOOKS_DATABASE_URL": database_url,
            "CRONHOOKS_AMQP_URL": amqp_url,
            "CRONHOOKS_ALLOW_PRIVATE_TARGETS": "true",
            "CRONHOOKS_LOG_FORMAT": "console",
        }
    )


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await db.create_pool(database_url, name="test", min_size=1, max_size=20)
    yield p
    await p.close()


@pytest.fixture
async def amqp(amqp_url: str) -> AsyncIterator[broker.AbstractRobustConnection]:
    conn = await broker.connect(amqp_url, name="test")
    yield conn
    await conn.close()


@pytest.fixture
async def relay(database_url: str, amqp: broker.AbstractRobustConnection) -> AsyncIterator[None]:
    """One outbox relay running for the test (what every service process runs)."""
    task = asyncio.create_task(OutboxRelay(dsn=database_url, amqp=amqp, name="test").run())
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    """A real HTTP agent on loopback that records what it receives (tests/support/agent.py)."""
    a = await Agent().start()
    yield a
    await a.stop()


@pytest.fixture
def clock() -> ManualClock:
    """A ManualClock at the real time, to the second (signatures stay verifiable)."""
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "system(services=..., start=..., settings={...}, open_webhook=False): how the "
        "`system` fixture starts the services (tests/support/system.py)",
    )


@pytest.fixture
async def system(
    settings: Settings, clock: ManualClock, agent: Agent, request: pytest.FixtureRequest
) -> AsyncIterator[System]:
    """The services running for this test on its database, vhost, clock and agent, as the
    closest `@pytest.mark.system(...)` says (tests/support/system.py: start_system); all
    of them, the clock at the real time to the second, when none does."""
    async with start_system(settings, clock, agent, **marked_options(request)) as system:
        yield system


# Under `pytest -n` (xdist, --dist loadgroup): the fault suite's tests share one private
# Postgres and RabbitMQ (tests/faults/conftest.py), started once per worker that runs
# one; kept on one worker, they start them once.
SERIAL_GROUPS = {"tests/faults/": "private-servers"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for prefix, group in SERIAL_GROUPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report: pytest.TestReport) -> object:
    """A worker's report goes to the controller as UTF-8 (pytest -n): a lone surrogate in
    it — the fuzz tests send them, and the services log what they refuse — would crash
    the worker (execnet: "surrogates not allowed"). They are sent escaped (\\ud800)."""
    data = yield
    return utf8_safe(data)


def utf8_safe(value: object) -> object:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {utf8_safe(k): utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(utf8_safe(v) for v in value)
    return value
