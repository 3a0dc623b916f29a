"""admin-api service: the command side for admins (GraphQL) and the admin read models.

Its parts, each a package:

* `http/` — the HTTP surface: POST /graphql, the web page and GraphiQL, the agent-cron
  API and JWKS, and (dev mode only) the debug endpoints;
* `graphql/` — the schema (SDL in *.graphql), resolvers by area, per-request DataLoaders;
  queries read the read models, mutations call the command side;
* `commands/` — validate → append typed events (+ the command's own state) in one
  transaction → project them inline → answer: webhooks, manual deliveries and replays,
  agents and their triggers, API keys, note writes (forwarded to the importer);
* `projections/` — the read models: which event makes which (a `Handlers` table and the
  batched kinds), the live projector that tails the event store in commit order (its own
  events again, and those of the other services; not from RabbitMQ), and the rebuild.

`auth.py` says who is calling (admin and agent tokens), `errors.py` what a command can
refuse. Each package keeps its SQL in one module (`queries.py`).
"""

from __future__ import annotations

import structlog

from cronhooks_admin.commands import Commands
from cronhooks_admin.commands.note_writes import NoteWrites
from cronhooks_admin.graphql.schema import build_schema
from cronhooks_admin.http.agent_api import add_agent_routes
from cronhooks_admin.http.debug import DebugRoutes, add_debug_routes
from cronhooks_admin.http.graphql_route import add_graphql_routes
from cronhooks_admin.http.pages import add_page_routes
from cronhooks_admin.projections.projector import Projector
from cronhooks_common.crypto import SecretBox
from cronhooks_common.keys import active_key
from cronhooks_common.service import Runtime
from cronhooks_common.tokens import AdminWriteTokens

log = structlog.get_logger(__name__)


class AdminApi:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        settings = runtime.settings
        self.commands = Commands(
            pool=runtime.pool,
            clock=runtime.clock,
            secrets=SecretBox(settings.secret_key),
            default_timezone=settings.timezone,
            allow_private=settings.allow_private_targets,
            allow_insecure=settings.allow_insecure_targets,
        )
        self.projector = Projector(runtime.pool, settings.database_url)
        self.note_writes = NoteWrites(
            importer_url=settings.importer_base_url,
            tokens=AdminWriteTokens(master_key=settings.secret_key, issuer=settings.public_url),
            clock=runtime.clock,
            caught_up=self.projector.caught_up,
        )
        add_page_routes(runtime.http)
        add_graphql_routes(
            runtime.http,
            schema=build_schema(),
            pool=runtime.pool,
            commands=self.commands,
            note_writes=self.note_writes,
            clock=runtime.clock,
        )
        add_agent_routes(
            runtime.http, pool=runtime.pool, triggers=self.commands.triggers, clock=runtime.clock
        )
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
