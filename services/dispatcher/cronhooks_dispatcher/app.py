"""Dispatcher service: turns `delivery.requested` into signed HTTP requests to agents, and
records what followed. This module is its composition root: it builds the parts once
(deps.py), says which handler takes which event (`HANDLERS`) and how a poison event ends
(`ENDINGS`), and starts the consumer.

A delivery's steps, in order:

1. request — the consumer (cronhooks_common.consumer, free mode,
   CRONHOOKS_DISPATCH_CONCURRENCY workers) takes `delivery.requested` in work notices of
   up to 64 events (work.py), and the other events of `HANDLERS` as messages;
2. look up — lookup.py: the stored event, its inbox row and its webhook's secret, one
   query for a burst; a message the store does not hold as sent is dropped; the stored
   event goes to its handler, with its typed data (cronhooks_common.handlers):
   `deliver_requested` or `deliver_released` (deliver.py);
3. admit — admit.py: FORBID, DELAY and execution groups; a request that may not go now is
   recorded skipped or waiting (`delivery.queued`);
4. sign and send — deliver.py: when the destination's limits and holds let it
   (destination_gates.py; from Postgres by destination_sync.py, which tells back what
   waits: destination_waits.py), the body (payload.py,
   context_notes.py for attachNotes), signed, POSTed through the shared session with the
   SSRF guard (sender.py), the answer judged (outcome.py; retry.py says when to try
   again);
5. record — record.py: the outcome event worded, and written with many others in one
   transaction; an attempt that waits for the importer is kept (waiting.py); a finished
   delivery's lanes go to whoever waits (handon.py, `delivery.released`), its webhook's
   health is counted (health.py), which may disable it and raise or resolve its alert
   (alerts.py).

The other handlers: finish.py (the importer's verdict on an attempt's note changes; a
delivery the scheduler ended), runs.py (a run's end, `run.finished`: lanes and health),
health.py (a webhook re-enabled or deleted), fire.py (`trigger.requested`: call an agent
back). alert_sink.py POSTs alert events to the
operator's URL. All SQL is in queries.py. Retries are durable timers in the scheduler.
"""

from __future__ import annotations

import aiohttp

from cronhooks_common.consumer import Consumer
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import (
    DeliveryFailed,
    DeliveryReleased,
    DeliveryRequested,
    NotesImported,
    NotesRejected,
    RunFinished,
    TriggerRequested,
    WebhookDeleted,
    WebhookUpdated,
)
from cronhooks_common.handlers import Handlers
from cronhooks_common.service import Runtime
from cronhooks_common.targets import connector_kwargs
from cronhooks_common.tokens import ApiTokens
from cronhooks_dispatcher import deliver, finish, fire, health, queries, runs
from cronhooks_dispatcher.alert_sink import AlertSink
from cronhooks_dispatcher.alerts import AlertPolicy
from cronhooks_dispatcher.context_notes import ContextNoteLoader
from cronhooks_dispatcher.deps import Call, Deps, Fault
from cronhooks_dispatcher.destination_gates import Destinations
from cronhooks_dispatcher.destination_sync import DestinationSync
from cronhooks_dispatcher.lookup import CONSUMER, NOTICED, DeliveryLookups, Receiver
from cronhooks_dispatcher.record import RecordWriter

# The relay in this process leads only when no other service's can: a herd waits on this
# process's one core, and the leader publishes every service's events (relay.py).
DEFER_RELAY = True

HANDLERS = Handlers[Call](
    {
        DeliveryRequested: deliver.deliver_requested,
        DeliveryReleased: deliver.deliver_released,  # a queued delivery's turn (handon.py)
        NotesImported: finish.finish_imported,
        NotesRejected: finish.finish_rejected,
        DeliveryFailed: finish.release_ended,  # final when the scheduler ends a delivery
        RunFinished: runs.finish_run,  # a run's end releases its lanes, counts its health
        WebhookUpdated: health.reset_health,
        WebhookDeleted: health.forget_health,  # resolves its open alert
        TriggerRequested: fire.call_back,
    }
)
# What a poison event (CONTRACT §15) started ends by, instead of waiting behind a dead
# letter: the delivery fails, the waiting attempt fails, the fire ends failed.
ENDINGS = Handlers[Fault](
    {
        DeliveryRequested: deliver.fail_request,
        DeliveryReleased: deliver.fail_request,
        NotesImported: finish.fail_waiting_attempt,
        NotesRejected: finish.fail_waiting_attempt,
        RunFinished: runs.release_by_fault,  # its lanes go on all the same
        TriggerRequested: fire.fail_fire,
    }
)
# Bound to the exchange: the rest of `HANDLERS` comes in work notices.
ROUTING_KEYS = tuple(key for key in HANDLERS.routing_keys if key not in NOTICED)


class DispatcherService:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._http: aiohttp.ClientSession | None = None
        self._consumer: Consumer | None = None
        self._destinations: DestinationSync | None = None
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
        settings = rt.settings
        concurrency = settings.dispatch_concurrency
        # One session for the process: keep-alive reuse, no per-request setup.
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=concurrency,
                limit_per_host=0,
                **connector_kwargs(settings.allow_private_targets),
            ),
            auto_decompress=True,
            # Every delivery is a request of its own: a cookie one agent sets must never
            # ride along to a later delivery (of that webhook or another at the host).
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self._writer.start()
        if self._sink is not None:
            self._sink.start()
        gates = Destinations(settings.destination_concurrency, rt.clock)
        self._destinations = DestinationSync(rt.pool, rt.clock, gates)
        await self._destinations.start()  # limits and holds apply from the first delivery
        deps = Deps(
            pool=rt.pool,
            clock=rt.clock,
            writer=self._writer,
            http=self._http,
            keys=deliver.SigningKeys(SecretBox.of(settings)),
            tokens=ApiTokens(
                master_key=settings.secret_key,
                issuer=settings.public_url,
                ttl_seconds=settings.api_token_ttl_seconds,
            ),
            api_url=settings.api_public_url,
            allow_private=settings.allow_private_targets,
            context=ContextNoteLoader(rt.pool),
            fires=fire.FireCaller(
                pool=rt.pool,
                http=self._http,
                box=SecretBox.of(settings),
                clock=rt.clock,
                algorithm=settings.fire_jwt_algorithm,
                writer=self._writer,
                issuer=settings.public_url,
                allow_private=settings.allow_private_targets,
            ),
            gates=gates,
            holds=self._destinations,
        )
        # One loader for every kind of message: a burst of them is one query.
        receiver = Receiver(DeliveryLookups(rt.pool), deps, HANDLERS, ENDINGS)
        self._consumer = Consumer(
            name=CONSUMER,
            amqp=rt.amqp,
            pool=rt.pool,
            inbox=queries.INBOX,
            routing_keys=ROUTING_KEYS,
            free=receiver.on_event,
            notice=receiver.on_notice,
            on_poison=receiver.end_by_fault,
            prefetch=concurrency,
            workers=concurrency,
            queue_type=settings.queue_type,
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._destinations is not None:
            self._destinations.destinations.give_back()  # waiting deliveries go back now
        if self._consumer is not None:
            await self._consumer.stop()  # in-flight attempts finish, the rest go back
        if self._destinations is not None:
            await self._destinations.stop()
        await self._writer.stop()
        if self._sink is not None:
            await self._sink.stop()
        if self._http is not None:
            await self._http.close()


async def bootstrap(runtime: Runtime) -> DispatcherService:
    return DispatcherService(runtime)
