"""admin-api service: the command side for admins (GraphQL) and the admin read models.

Flow: POST /graphql (http.py) → resolvers.py → commands.py (validate, append, project
inline) for mutations, or the read-model tables for queries. The live projector
(projector.py) tails the event store in commit order and projects every event (its own
again, and those of the other services) with projection.py — not from RabbitMQ.
"""

from __future__ import annotations

import structlog

from cronhooks_admin.agent_api import add_agent_routes
from cronhooks_admin.agents import Agents
from cronhooks_admin.api_keys import ApiKeys
from cronhooks_admin.commands import Commands
from cronhooks_admin.debug import DebugRoutes, add_debug_routes
from cronhooks_admin.http import add_graphql_routes
from cronhooks_admin.note_writes import NoteWrites
from cronhooks_admin.projector import Projector
from cronhooks_admin.schema import build_schema
from cronhooks_common.crypto import SecretBox
from cronhooks_common.keys import active_key
from cronhooks_common.service import Runtime
from cronhooks_common.tokens import AdminWriteTokens

log = structlog.get_logger(__name__)


class AdminApi:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.commands = Commands(
            pool=runtime.pool,
            clock=runtime.clock,
            secrets=SecretBox(runtime.settings.secret_key),
            default_timezone=runtime.settings.timezone,
            allow_private=runtime.settings.allow_private_targets,
        )
        settings = runtime.settings
        self.projector = Projector(runtime.pool, settings.database_url)
        self.note_writes = NoteWrites(
            importer_url=settings.importer_base_url,
            tokens=AdminWriteTokens(master_key=settings.secret_key, issuer=settings.public_url),
            clock=runtime.clock,
            caught_up=self.projector.caught_up,
        )
        self.agents = Agents(
            pool=runtime.pool,
            clock=runtime.clock,
            allow_private=runtime.settings.allow_private_targets,
        )
        add_graphql_routes(
            runtime.http,
            schema=build_schema(),
            pool=runtime.pool,
            commands=self.commands,
            agents=self.agents,
            api_keys=ApiKeys(pool=runtime.pool, clock=runtime.clock),
            note_writes=self.note_writes,
            clock=runtime.clock,
        )
        add_agent_routes(runtime.http, pool=runtime.pool, agents=self.agents, clock=runtime.clock)
        # CONTRACT §12: the unauthenticated debug endpoints exist only in dev mode.
        self.debug: DebugRoutes | None = None
        if settings.dev_mode:
            self.debug = add_debug_routes(
                runtime.http, pool=runtime.pool, commands=self.commands, clock=runtime.clock
            )

    async def start(self) -> None:
        if self.debug is not None:
            log.warning(
                "dev_mode_enabled",
                detail="CRONHOOKS_DEV_MODE=true: /debug/* is served without authentication;"
                " never enable it in production",
            )
        await self._ensure_signing_key()
        await self.note_writes.start()
        await self.projector.start()

    async def _ensure_signing_key(self) -> None:
        """An active fire-JWT key of the configured algorithm from the start, so that the
        JWKS agents fetch before their first fire is never empty."""
        rt = self.runtime
        async with rt.pool.acquire() as conn:
            await active_key(
                conn,
                SecretBox(rt.settings.secret_key),
                algorithm=rt.settings.fire_jwt_algorithm,
                now=rt.clock.now(),
            )

    async def stop(self) -> None:
        await self.projector.stop()
        await self.note_writes.stop()


async def bootstrap(runtime: Runtime) -> AdminApi:
    return AdminApi(runtime)
