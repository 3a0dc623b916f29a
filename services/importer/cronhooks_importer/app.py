"""importer service: owns the note store.

Flow: `delivery.changes_received` (consumer) → imports.py: check (rules.py) and apply
(store.py) all or nothing → `note.changed` per note and `notes.imported`/`notes.rejected`
on the delivery's stream. The agent token API (api.py) applies pushes the same way.
"""

from __future__ import annotations

from cronhooks_common.consumer import Consumer
from cronhooks_common.events import EventType
from cronhooks_common.service import Runtime
from cronhooks_importer.imports import make_handler


class Importer:
    def __init__(self, runtime: Runtime) -> None:
        self.consumer = Consumer(
            name="importer",
            amqp=runtime.amqp,
            pool=runtime.pool,
            inbox="importer.inbox",
            routing_keys=[EventType.DELIVERY_CHANGES_RECEIVED],
            transactional=make_handler(runtime.clock),
        )

    async def start(self) -> None:
        await self.consumer.start()

    async def stop(self) -> None:
        await self.consumer.stop()


async def bootstrap(runtime: Runtime) -> Importer:
    return Importer(runtime)
