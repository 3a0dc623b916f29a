"""importer service: owns the note store.

Flow: `delivery.changes_received` (consumer) → imports.py: check (rules.py) and apply
(store.py) all or nothing → `note.changed` per note and `notes.imported`/`notes.rejected`
on the delivery's stream. Agents with a token read and write through agent_notes.py, by
REST (api.py) or GraphQL (agent_graphql.py), with the same apply function.
"""

from __future__ import annotations

from cronhooks_common.consumer import Consumer
from cronhooks_common.events import EventType
from cronhooks_common.service import Runtime
from cronhooks_common.tokens import AdminWriteTokens, ApiTokens
from cronhooks_importer.agent_graphql import add_agent_graphql
from cronhooks_importer.agent_notes import AgentNotes
from cronhooks_importer.api import add_token_api
from cronhooks_importer.callers import Callers
from cronhooks_importer.change_matcher import ChangeMatcher
from cronhooks_importer.imports import make_fault_ender, make_handler
from cronhooks_importer.scopes import WebhookScopes


class Importer:
    def __init__(self, runtime: Runtime) -> None:
        settings = runtime.settings
        tokens = ApiTokens(
            master_key=settings.secret_key,
            issuer=settings.public_url,
            ttl_seconds=settings.api_token_ttl_seconds,
        )
        self.scopes = WebhookScopes(runtime.pool)
        callers = Callers(
            tokens=tokens,
            admin_tokens=AdminWriteTokens(
                master_key=settings.secret_key, issuer=settings.public_url
            ),
            scopes=self.scopes,
            clock=runtime.clock,
            pool=runtime.pool,
        )
        notes = AgentNotes(pool=runtime.pool, clock=runtime.clock)
        add_token_api(runtime.http, notes=notes, callers=callers)
        add_agent_graphql(runtime.http, notes=notes, callers=callers)
        self.consumer = Consumer(
            name="importer",
            amqp=runtime.amqp,
            pool=runtime.pool,
            inbox="importer.inbox",
            routing_keys=[EventType.DELIVERY_CHANGES_RECEIVED],
            transactional=make_handler(runtime.clock),
            on_poison=make_fault_ender(runtime.pool, "importer.inbox", runtime.clock),
            queue_type=runtime.settings.queue_type,
        )
        # Change webhooks: committed note batches → delivery.requested (change_matcher.py).
        self.matcher = ChangeMatcher(runtime.pool, settings.database_url, runtime.clock)

    async def start(self) -> None:
        await self.consumer.start()
        await self.matcher.start()

    async def stop(self) -> None:
        await self.matcher.stop()
        await self.consumer.stop()


async def bootstrap(runtime: Runtime) -> Importer:
    return Importer(runtime)
