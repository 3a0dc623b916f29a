"""Dispatcher service: turns `delivery.requested` into signed HTTP requests to agents.

Flow: consumer (free mode, many workers) → `Dispatcher.handle` (delivery.py): load the
secret, build and sign the body (payload.py), POST (sender.py), classify the answer
(outcome.py), record attempt + outcome event in one transaction.
"""

from __future__ import annotations

import aiohttp

from cronhooks_common.consumer import Consumer
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import EventType
from cronhooks_common.service import Runtime
from cronhooks_common.tokens import ApiTokens
from cronhooks_dispatcher.delivery import INBOX, Dispatcher

# How many deliveries are in flight at once per dispatcher process.
CONCURRENCY = 256


class DispatcherService:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._http: aiohttp.ClientSession | None = None
        self._consumer: Consumer | None = None

    async def start(self) -> None:
        rt = self._runtime
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONCURRENCY * 2, limit_per_host=0),
            auto_decompress=True,
        )
        dispatcher = Dispatcher(
            pool=rt.pool,
            http=self._http,
            secrets=SecretBox(rt.settings.secret_key),
            tokens=ApiTokens(
                master_key=rt.settings.secret_key,
                issuer=rt.settings.public_url,
                ttl_seconds=rt.settings.api_token_ttl_seconds,
            ),
            api_url=rt.settings.api_public_url,
            clock=rt.clock,
        )
        self._consumer = Consumer(
            name="dispatcher",
            amqp=rt.amqp,
            pool=rt.pool,
            inbox=INBOX,
            routing_keys=[EventType.DELIVERY_REQUESTED],
            free=dispatcher.handle,
            prefetch=CONCURRENCY,
            workers=CONCURRENCY,
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
        if self._http is not None:
            await self._http.close()


async def bootstrap(runtime: Runtime) -> DispatcherService:
    return DispatcherService(runtime)
