"""importer service: owns the note store. The composition root.

1. An agent's answer with note changes: `delivery.changes_received` (the consumer, routed
   by answers.HANDLERS) → answers.py → the one write path, imports.py: the batch rules
   (rules.py), applied all or nothing (store.py) → `note.changed` per note and the
   verdict, `notes.imported`/`notes.rejected`, on the delivery's stream. An answer that
   keeps failing is rejected by answers.fault_ender.
2. Agents and admins read and write notes through the agent API: REST (api.py) and
   GraphQL (agent_graphql.py), both through agent_notes.py, with callers.py and scopes.py
   saying who calls and what their webhook allows now; writes take the same write path
   (imports.py) and close with the verdict on a `push-{uuid}` stream.
3. Runs of asynchronous agents (CONTRACT §16.2): the agent reports its run and heartbeats
   through the token API (runs_api.py → runs.py); run_sweep.py ends the runs whose
   deadline passed.
4. Change webhooks: change_matcher.py tails the committed `webhook.*` and `note.changed`
   events; change_step.py (routed by `MATCHING`) keeps the change webhooks, judges each
   note batch by change_index.py and requests its deliveries (`delivery.requested`).

Every SQL statement is in queries.py.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from cronhooks_common.consumer import Consumer
from cronhooks_common.events import Event
from cronhooks_common.service import Runtime
from cronhooks_common.settings import Settings
from cronhooks_common.tokens import AdminWriteTokens, ApiTokens
from cronhooks_importer.agent_graphql import add_agent_graphql
from cronhooks_importer.agent_notes import AgentNotes
from cronhooks_importer.answers import HANDLERS, INBOX, Importing, fault_ender
from cronhooks_importer.api import add_token_api
from cronhooks_importer.callers import Callers
from cronhooks_importer.chain_limit import ChainPolicy
from cronhooks_importer.change_matcher import ChangeMatcher
from cronhooks_importer.run_sweep import RunSweep
from cronhooks_importer.runs import Runs
from cronhooks_importer.runs_api import add_run_api
from cronhooks_importer.scopes import WebhookScopes


class Importer:
    def __init__(self, runtime: Runtime) -> None:
        settings = runtime.settings
        clock = runtime.clock
        tokens = ApiTokens(
            master_key=settings.secret_key,
            issuer=settings.public_url,
            ttl_seconds=settings.api_token_ttl_seconds,
            previous_keys=settings.secret_key_previous,
        )
        self.scopes = WebhookScopes(runtime.pool)
        callers = Callers(
            tokens=tokens,
            admin_tokens=AdminWriteTokens(
                master_key=settings.secret_key,
                issuer=settings.public_url,
                previous_keys=settings.secret_key_previous,
            ),
            scopes=self.scopes,
            clock=clock,
            pool=runtime.pool,
        )
        notes = AgentNotes(pool=runtime.pool, clock=clock)
        add_token_api(runtime.http, notes=notes, callers=callers)
        add_agent_graphql(runtime.http, notes=notes, callers=callers)
        add_run_api(runtime.http, runs=Runs(runtime.pool, clock), callers=callers)
        self.sweep = RunSweep(runtime.pool, clock)

        async def handle(conn: asyncpg.Connection, event: Event) -> None:
            await HANDLERS.handle(Importing(conn, clock), event)

        self.consumer = Consumer(
            name="importer",
            amqp=runtime.amqp,
            pool=runtime.pool,
            inbox=INBOX,
            routing_keys=HANDLERS.routing_keys,
            transactional=handle,
            on_poison=fault_ender(runtime.pool, clock),
            queue_type=runtime.settings.queue_type,
        )
        self.matcher = ChangeMatcher(
            runtime.pool, settings.database_url, clock, chains=chain_policy(settings)
        )

    async def start(self) -> None:
        await self.consumer.start()
        await self.matcher.start()
        self.sweep.start()

    async def stop(self) -> None:
        await self.sweep.stop()
        await self.matcher.stop()
        await self.consumer.stop()


async def bootstrap(runtime: Runtime) -> Importer:
    return Importer(runtime)


def chain_policy(settings: Settings) -> ChainPolicy:
    """A chain's count is kept while its deliveries are (CRONHOOKS_DELIVERY_RETENTION_DAYS;
    30 days when those are kept forever, which bounds the table all the same)."""
    days = settings.delivery_retention_days or 30
    return ChainPolicy(
        limit=settings.max_chain_deliveries,
        post_alerts=settings.alert_webhook_url is not None,
        keep=timedelta(days=days),
    )
