"""POST alert events to CRONHOOKS_ALERT_WEBHOOK_URL, at least once (CONTRACT §12).

The work list is `dispatcher.alert_posts`: a row per alert event, written in the
transaction that appended the event (alerts.py), so a crash between the two cannot lose
a POST. Every dispatcher replica runs a sink; a replica leases due rows by moving their
`due_at` past its own send (`FOR UPDATE SKIP LOCKED`: no two replicas take one row), POSTs
the event as the event store holds it (the row names it; nothing from the broker), and
deletes the row on a 2xx. Anything else comes due again after a backoff (10 s, 30 s, …
capped at 1 h; a `Retry-After` wins); a replica that dies mid-send leaves its lease to
expire and another sends it again, with the same `webhook-id`. One alert's events leave
in order: a row waits while an earlier one of its alert is still owed.

The URL is the operator's own configuration, not an admin's input, so the SSRF guard
for webhook targets does not apply to it: an alert receiver on the same host or network
(an Alertmanager, a chat bridge) is the common case. Redirects are still not followed.
Signed as §3 with CRONHOOKS_ALERT_WEBHOOK_SECRET; without a secret it goes unsigned.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from uuid import UUID

import aiohttp
import asyncpg
import structlog
from prometheus_client import Counter

from cronhooks_common import eventstore
from cronhooks_common.buckets import Router
from cronhooks_common.clock import Clock
from cronhooks_common.events import AlertFields, Event, alert_stream
from cronhooks_common.signing import USER_AGENT, SecretKeys, signature_headers
from cronhooks_dispatcher import alert_messages, payload, queries, sender
from cronhooks_dispatcher.retry import next_attempt_at

log = structlog.get_logger(__name__)

POSTS = Counter(
    "cronhooks_dispatcher_alert_posts_total",
    "POSTs to the alert sink, by outcome: delivered, failed",
    ["outcome"],
)
TIMEOUT_SECONDS = 10.0
LEASE = timedelta(seconds=60)  # longer than a send: a live replica's row is never retaken
POLL = timedelta(seconds=30)  # rows of other replicas (a crashed one's lease) come due
BATCH = 50


class AlertSink:
    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        *,
        url: str,
        secret: str | None,
        public_url: str,
    ) -> None:
        self._pool = pool
        self._router = Router()
        self._clock = clock
        self._url = url
        self._keys = SecretKeys.of(secret) if secret else None
        self._public_url = public_url
        self._wake = asyncio.Event()
        self._http: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._http is not None:
            await self._http.close()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()  # before looking: a wake during the round is not lost
            try:
                full = await self.send_due()
            except Exception as exc:  # the database gone, mostly: keep trying, rows wait
                log.warning("alert_sink_error", error=repr(exc))
                await asyncio.sleep(1.0)
                continue
            if full:
                continue
            next_due = await self._pool.fetchval(queries.NEXT_POST_DUE)
            deadline = self._clock.now() + POLL
            if next_due is not None:
                deadline = min(deadline, next_due)
            await self._clock.sleep_until(deadline, self._wake)

    async def send_due(self) -> bool:
        """Send what is due; True if there may be more right away."""
        now = self._clock.now()
        rows = await self._pool.fetch(queries.CLAIM_POSTS, now, now + LEASE, BATCH)
        if not rows:
            return False
        events = await eventstore.read_events(
            self._pool, [(r["event_id"], alert_stream(r["alert_id"])) for r in rows], self._router
        )
        await asyncio.gather(*(self._send(r["event_id"], r["tries"], events) for r in rows))
        return len(rows) == BATCH

    async def _send(self, event_id: UUID, tries: int, events: dict[UUID, Event]) -> None:
        event = events.get(event_id)
        if event is None:  # the store no longer holds it: nothing true to say
            await self._pool.execute(queries.POSTED, event_id)
            return
        alert = event.payload
        assert isinstance(alert, AlertFields), event.type
        now = self._clock.now()
        raw = payload.encode(alert_messages.body(event, alert, self._public_url))
        headers = self._headers(alert_messages.message_id(alert), int(now.timestamp()), raw, tries)
        result = await sender.post(
            self._assert_http(),
            self._url,
            body=raw,
            headers=headers,
            timeout_seconds=TIMEOUT_SECONDS,
            allow_private=True,  # operator configuration (module docstring)
        )
        if result.status is not None and 200 <= result.status < 300:
            POSTS.labels("delivered").inc()
            await self._pool.execute(queries.POSTED, event_id)
            log.info("alert_posted", message_id=headers["webhook-id"], tries=tries + 1)
            return
        error = result.error or f"HTTP {result.status}"
        POSTS.labels("failed").inc()
        due = next_attempt_at(tries + 1, result.retry_after, self._clock.now())
        await self._pool.execute(queries.POST_LATER, event_id, due, error)
        log.warning(
            "alert_post_failed", message_id=headers["webhook-id"], error=error, retry_at=str(due)
        )

    def _headers(self, message_id: str, timestamp: int, raw: bytes, tries: int) -> dict[str, str]:
        if self._keys is not None:
            return signature_headers(
                self._keys, delivery_id=message_id, timestamp=timestamp, body=raw, attempt=tries + 1
            )
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Webhook-ID": message_id,
            "X-Webhook-Timestamp": str(timestamp),
            "X-Webhook-Attempt": str(tries + 1),
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
        }
        return headers

    def _assert_http(self) -> aiohttp.ClientSession:
        assert self._http is not None, "start() first"
        return self._http
