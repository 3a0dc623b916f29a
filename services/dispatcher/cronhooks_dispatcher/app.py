"""Dispatcher service: turns `delivery.requested` into signed HTTP requests to agents.

Flow: consumer (free mode, `CRONHOOKS_DISPATCH_CONCURRENCY` workers; `delivery.requested`
arrives in work notices of up to 64 events, work.py, the rest as events) → the stored event,
inbox and secret in one batched lookup (lookup.py; a message the store does not hold as
sent is dropped) → `Dispatcher.handle` (delivery.py): build and sign the body (payload.py),
POST through the shared session with the SSRF guard (sender.py), classify the answer
(outcome.py), and record attempt + next event, many outcomes per transaction
(recording.py). Retries are durable timers in the scheduler (retry.py says when);
webhook health (health.py) disables webhooks that are gone or keep failing, and raises
and resolves their alerts (alerts.py), which alert_sink.py POSTs to the operator's URL.
"""

from __future__ import annotations

from uuid import UUID

import aiohttp

from cronhooks_common import work
from cronhooks_common.consumer import Consumer
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import Event, EventType
from cronhooks_common.service import Runtime
from cronhooks_common.targets import connector_kwargs
from cronhooks_common.tokens import ApiTokens
from cronhooks_common.trust import as_noticed, as_stored
from cronhooks_dispatcher.alert_sink import AlertSink
from cronhooks_dispatcher.alerts import AlertPolicy
from cronhooks_dispatcher.context_notes import ContextNoteLoader
from cronhooks_dispatcher.delivery import Dispatcher, SigningKeys
from cronhooks_dispatcher.fire import FireCaller
from cronhooks_dispatcher.lookup import DeliveryLookups
from cronhooks_dispatcher.recording import INBOX, RecordWriter

# The relay in this process leads only when no other service's can: a herd waits on this
# process's one core, and the leader publishes every service's events (relay.py).
DEFER_RELAY = True

# `delivery.requested` comes in work notices, many to a message (work.py).
NOTICED = work.carried_to("dispatcher")
ROUTING_KEYS = (
    EventType.NOTES_IMPORTED,
    EventType.NOTES_REJECTED,
    EventType.WEBHOOK_UPDATED,
    EventType.WEBHOOK_DELETED,  # resolves its open alert
    EventType.DELIVERY_FAILED,  # also final when the scheduler cancels a retry
    EventType.TRIGGER_REQUESTED,
    EventType.DELIVERY_RELEASED,  # a queued delivery's turn (lanes.py)
)


class DispatcherService:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._http: aiohttp.ClientSession | None = None
        self._consumer: Consumer | None = None
        settings = runtime.settings
        self._sink = (
            AlertSink(
                runtime.pool,
                runtime.clock,
                url=settings.alert_webhook_url,
                secret=settings.alert_webhook_secret,
                public_url=settings.public_url,
            )
            if settings.alert_webhook_url
            else None
        )
        self._writer = RecordWriter(
            runtime.pool,
            runtime.clock,
            auto_disable_after=settings.auto_disable_after,
            alerts=AlertPolicy(
                alert_after=settings.alert_after,
                post=self._sink is not None,
                wake=self._sink.wake if self._sink is not None else lambda: None,
            ),
        )

    async def start(self) -> None:
        rt = self._runtime
        concurrency = rt.settings.dispatch_concurrency
        # One session for the process: keep-alive reuse, no per-request setup.
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=concurrency,
                limit_per_host=0,
                **connector_kwargs(rt.settings.allow_private_targets),
            ),
            auto_decompress=True,
            # Every delivery is a request of its own: a cookie one agent sets must never
            # ride along to a later delivery (of that webhook or another at the host).
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self._writer.start()
        if self._sink is not None:
            self._sink.start()
        lookups = DeliveryLookups(rt.pool)  # one loader: a burst of both kinds is one query
        dispatcher = Dispatcher(
            pool=rt.pool,
            http=self._http,
            keys=SigningKeys(SecretBox(rt.settings.secret_key)),
            tokens=ApiTokens(
                master_key=rt.settings.secret_key,
                issuer=rt.settings.public_url,
                ttl_seconds=rt.settings.api_token_ttl_seconds,
            ),
            api_url=rt.settings.api_public_url,
            clock=rt.clock,
            writer=self._writer,
            allow_private=rt.settings.allow_private_targets,
            context=ContextNoteLoader(rt.pool),
        )
        fires = FireCaller(
            pool=rt.pool,
            http=self._http,
            box=SecretBox(rt.settings.secret_key),
            clock=rt.clock,
            algorithm=rt.settings.fire_jwt_algorithm,
            writer=self._writer,
            issuer=rt.settings.public_url,
            allow_private=rt.settings.allow_private_targets,
        )

        async def handle(sent: Event) -> None:
            # The event store decides (CONTRACT §15): act on the event as stored, looked up
            # with the inbox and the secret in one batched query; drop what it does not hold.
            found = await lookups.load((sent.event_id, sent.stream))
            event = as_stored(sent, found.stored, consumer="dispatcher")
            if event is None:
                return
            if event.type == EventType.TRIGGER_REQUESTED:
                await fires.handle(event, found)
            else:
                await dispatcher.handle(event, found)

        async def handle_notice(ref: work.Ref) -> None:
            # A notice names the event; the store holds what it is (and the lookup reads
            # the inbox and the secret with it, batched with the other lookups).
            found = await lookups.load((ref.event_id, ref.stream))
            event = as_noticed(ref.event_id, found.stored, types=NOTICED, consumer="dispatcher")
            if event is not None:
                await dispatcher.handle(event, found)

        async def end_by_fault(event_id: UUID, stream: str, error: Exception) -> bool:
            # A poison event (CONTRACT §15): what it started ends instead of waiting
            # behind a dead letter — the delivery fails, the fire ends failed.
            found = await lookups.load((event_id, stream))
            event = found.stored
            if event is None:
                return False  # not in the store: nothing started, dead-letter the message
            if found.handled:
                return True  # ended meanwhile (a redelivery, the watchdog)
            if event.type == EventType.TRIGGER_REQUESTED:
                return await fires.end_by_fault(event, error)
            return await dispatcher.end_by_fault(event, error)

        self._consumer = Consumer(
            name="dispatcher",
            amqp=rt.amqp,
            pool=rt.pool,
            inbox=INBOX,
            routing_keys=ROUTING_KEYS,
            free=handle,
            notice=handle_notice,
            on_poison=end_by_fault,
            prefetch=concurrency,
            workers=concurrency,
            queue_type=rt.settings.queue_type,
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()  # in-flight attempts finish, the rest go back
        await self._writer.stop()
        if self._sink is not None:
            await self._sink.stop()
        if self._http is not None:
            await self._http.close()


async def bootstrap(runtime: Runtime) -> DispatcherService:
    return DispatcherService(runtime)
