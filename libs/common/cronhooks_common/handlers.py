"""Routing events to their handlers by type: each service's `HANDLERS` table.

A service declares which handler takes which event class, once:

    HANDLERS = Handlers[asyncpg.Connection]({
        WebhookCreated: on_webhook_configured,
        DeliveryAttemptFailed: on_attempt_failed,
    })

and its consumer binds `HANDLERS.routing_keys` and calls `HANDLERS.handle(ctx, event)`,
which decodes the event's typed data and awaits `handler(ctx, event, payload)`. No
service branches on type strings; what a service hears is the table's keys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from cronhooks_common.events import Event, Payload

Ctx = TypeVar("Ctx")

# handler(ctx, event, payload): the payload is an instance of the class it is filed under.
Handler = Callable[[Ctx, Event, Any], Awaitable[None]]


class Handlers(Generic[Ctx]):
    """An explicit table from event class to handler."""

    def __init__(self, table: Mapping[type[Payload], Handler[Ctx]]) -> None:
        self._by_type: dict[str, Handler[Ctx]] = {}
        for cls, handler in table.items():
            if not cls.TYPE:
                raise TypeError(f"{cls.__name__} is not an event type")
            self._by_type[cls.TYPE] = handler

    @property
    def routing_keys(self) -> tuple[str, ...]:
        """The event types the table handles (the queue's bindings)."""
        return tuple(self._by_type)

    def __contains__(self, event_type: object) -> bool:
        return event_type in self._by_type

    async def handle(self, ctx: Ctx, event: Event) -> None:
        """Decode `event` and run its handler. KeyError for a type the table does not
        handle (a consumer only hears its keys); ValueError if the data does not fit."""
        handler = self._by_type[event.type]
        await handler(ctx, event, event.payload)
