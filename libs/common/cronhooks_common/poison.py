"""What becomes of a message a consumer cannot handle: retried, ended, or dead-lettered.

Transient failures (database or broker gone) leave the message unacked and retry with
backoff for as long as it takes. Any other exception is retried a few times too (an
infrastructure fault can surface as an unexpected error). A message that keeps failing is
poison: the service's `on_poison` hook is asked to end what the event started (CONTRACT
§15: a delivery fails with `internal error: …`, a fire ends `failed`), so nothing stays
pending behind a dead letter; only what the hook cannot end is logged and dead-lettered.
A message that is not an event (or a work notice) at all is dead-lettered at once.

`CONSUMED` counts what became of every message a consumer took, handled or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import structlog
from aiormq.abc import DeliveredMessage
from prometheus_client import Counter

from cronhooks_common.acks import AckBatcher
from cronhooks_common.broker import TRANSIENT_AMQP_ERRORS
from cronhooks_common.db import TRANSIENT_DB_ERRORS
from cronhooks_common.events import Event

log = structlog.get_logger(__name__)

# (event id, stream as the message names them, the error): True when the hook recorded an
# end to what the event started (the message is then acked), False to dead-letter it. The
# hook finds the event in the store itself: the message is only news.
PoisonHandler = Callable[[UUID, str, Exception], Awaitable[bool]]

CONSUMED = Counter(
    "cronhooks_events_consumed_total", "Events taken from the queue", ["consumer", "outcome"]
)
TRANSIENT = (*TRANSIENT_DB_ERRORS, *TRANSIENT_AMQP_ERRORS)
POISON_TRIES = 5  # attempts before a message that fails with a non-transient error is parked


async def with_retries(work: Callable[[], Awaitable[None]]) -> Exception | None:
    """Run `work` until it succeeds (None). Transient errors (database or broker gone)
    retry with backoff for as long as it takes; any other error a few times, then it
    is returned: the message is poison."""
    delay, failures = 0.2, 0
    while True:
        try:
            await work()
            return None
        except TRANSIENT as exc:
            log.warning("consumer_transient_error", error=repr(exc), retry_in=delay)
        except Exception as exc:
            failures += 1
            if failures >= POISON_TRIES:
                return exc
            log.warning("consumer_error_retrying", error=repr(exc), retry_in=delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


class Poison:
    """One consumer's way out for what it cannot handle: the service's hook ends what
    the event started (the message is acked), or the message is dead-lettered (rejected
    without requeue: the queue's dead-letter exchange parks it). Each is logged and
    counted under the consumer's name."""

    def __init__(
        self,
        *,
        consumer: str,
        queue: str,
        acks: AckBatcher,
        on_poison: PoisonHandler | None,
    ) -> None:
        self._consumer = consumer
        self._queue = queue
        self._acks = acks
        self._on_poison = on_poison

    async def malformed(self, message: DeliveredMessage, what: str, **context: Any) -> None:
        """Dead-letter a message that cannot even be read; `what` is the log line's event."""
        log.error(what, **context)
        CONSUMED.labels(self._consumer, "dead_lettered").inc()
        await self._acks.reject(message)

    async def ended(self, event_id: UUID, stream: str, error: Exception) -> bool:
        """Ask the service to end what a poison event started; True if it did."""
        if self._on_poison is None:
            return False
        try:
            ended = await self._on_poison(event_id, stream, error)
        except Exception as exc:  # the hook's own failure: the dead letter stays the answer
            log.error("poison_hook_failed", queue=self._queue, error=repr(exc))
            return False
        if ended:
            log.error(
                "event_ended_by_fault",
                queue=self._queue,
                event_id=str(event_id),
                stream=stream,
                exc_info=error,
            )
            CONSUMED.labels(self._consumer, "ended_by_fault").inc()
        return ended

    async def dead_letter(self, message: DeliveredMessage, event: Event, error: Exception) -> None:
        """End what `event` started if the service can, else dead-letter its message."""
        if await self.ended(event.event_id, event.stream, error):
            self._acks.ack(message)
            return
        log.error(
            "event_dead_lettered",
            queue=self._queue,
            event_type=event.type,
            event_id=str(event.event_id),
            stream=event.stream,
            exc_info=error,
        )
        await self._acks.reject(message)
        CONSUMED.labels(self._consumer, "dead_lettered").inc()
