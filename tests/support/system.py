"""One test's system: the services running in-process on the test's own database and vhost,
the ManualClock they read, a real agent on loopback and an admin token.

tests/conftest.py builds it: the `system` fixture, with the options of the closest
`@pytest.mark.system(...)` (a test's own over its module's `pytestmark`):

- services: which services run, all by default;
- start: where the clock starts, a datetime or a function called as the test starts
  (the real time to the second when not given);
- settings: Settings fields to replace, e.g. {"allow_private_targets": False};
- open_webhook: first create token_api's open webhook (id 1), which the api tokens that
  token_api.mint makes belong to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from cronhooks_cli.cli import SERVICES
from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.support import token_api
from tests.support.agent import Agent
from tests.support.inprocess import Running, admin_token, running


@dataclass
class System:
    """What a test drives. `graphql`, `urls` and `services` are those of the running
    services (tests.support.inprocess.Running), so a System goes wherever a Running does
    (tests.support.flows, tests.support.token_api)."""

    settings: Settings
    clock: ManualClock
    agent: Agent
    admin: str  # an admin token, for the Authorization header
    running: Running

    @property
    def dsn(self) -> str:
        """The test's own database."""
        return self.settings.database_url

    @property
    def vhost(self) -> str:
        """The test's own RabbitMQ vhost."""
        return unquote(urlsplit(self.settings.amqp_url).path.removeprefix("/"))

    @property
    def urls(self) -> dict[str, str]:
        """Each running service's base URL, by name."""
        return self.running.urls

    @property
    def services(self) -> dict[str, Any]:
        """Each running service, by name."""
        return self.running.services

    async def graphql(
        self, token: str | None, query: str, variables: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """POST the admin API's /graphql with `token` as Bearer (none if None)."""
        return await self.running.graphql(token, query, variables)


Start = datetime | Callable[[], datetime]


@asynccontextmanager
async def start_system(
    base: Settings,
    clock: ManualClock,
    agent: Agent,
    *,
    services: Iterable[str] = tuple(SERVICES),
    start: Start | None = None,
    settings: dict[str, Any] | None = None,
    open_webhook: bool = False,
) -> AsyncIterator[System]:
    """The services started on `base` (with `settings` replaced) and `clock` (set to
    `start`); stopped when the block ends."""
    if start is not None:
        clock.set(start() if callable(start) else start)
    configured = dataclasses.replace(base, **settings) if settings else base
    async with running(configured, clock, tuple(services)) as r:
        system = System(configured, clock, agent, await admin_token(configured.database_url), r)
        if open_webhook:
            assert await token_api.open_webhook(system, system.admin) == token_api.OPEN_WEBHOOK
        yield system


def marked_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The options the `system` markers of a test give, the closest over the farthest (a
    test's own marker over its module's); `settings` are merged field by field."""
    given: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("system"))):
        settings = {**given.get("settings", {}), **marker.kwargs.get("settings", {})}
        given.update(marker.kwargs)
        if settings:
            given["settings"] = settings
    return given
