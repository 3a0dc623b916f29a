"""The fault suite restarts Postgres and RabbitMQ: on servers of its own, never the
machine's (other programs and other test runs use those). One private Postgres cluster and
one private RabbitMQ node (tests/support/servers.py), started the first time a fault test
asks for them and stopped at the end of the session; the databases and vhosts of the
fault tests live there, made as everywhere else (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conftest import migrated_template
from tests.support import servers
from tests.support.servers import PrivateServers


@pytest.fixture(scope="session")
async def private_servers() -> AsyncIterator[PrivateServers]:
    if reason := servers.missing():
        pytest.skip(f"the fault suite restarts private servers: {reason}")
    async with servers.private_servers() as running:
        yield running


@pytest.fixture(scope="session")
def pg_server(private_servers: PrivateServers) -> str:
    return private_servers.pg_server


@pytest.fixture(scope="session")
def amqp_server(private_servers: PrivateServers) -> str:
    return private_servers.amqp_server


@pytest.fixture(scope="session")
def rabbit_api(private_servers: PrivateServers) -> str:
    return private_servers.management_api


@pytest.fixture(scope="session")
async def template_db(pg_server: str) -> AsyncIterator[str]:
    # As tests/conftest.py's, defined again: pytest keeps a session fixture's value per
    # definition, and the other one may already hold the machine server's template.
    async with migrated_template(pg_server) as name:
        yield name
