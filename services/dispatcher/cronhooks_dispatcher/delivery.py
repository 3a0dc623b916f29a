"""Handle `delivery.requested`: sign, POST, and record the attempt and what it led to.

The HTTP call runs outside any transaction; what follows is recorded afterwards in one
(group-committed) transaction together with the inbox row. If the process dies in
between, the broker redelivers the message and the agent sees the same (id, attempt)
again: at least once, as promised.

What an attempt leads to (all on the delivery's own stream):
* success → `delivery.succeeded`;
* an answer with note changes → `delivery.changes_received`; the importer answers with
  `notes.imported` / `notes.rejected`, and only then is the attempt finished
  (`_import_finished`);
* failure with attempts left → `delivery.attempt_failed` with `retry_at` (the scheduler
  turns it into a durable retry timer); without → `delivery.failed`.
Finished deliveries feed the webhook's health (health.py): 410 Gone or too many
consecutive failures disable it. records.py words each of these records.

Nothing an agent sends can leave a delivery pending (CONTRACT §15): judging the answer
never raises (outcome.py, retry.py), and a record the database refuses is replaced by a
failed attempt saying `internal error: …`. An event that fails however often it is
handled (a bug of ours) is ended by `end_by_fault`, which the consumer calls before it
would dead-letter the message; the scheduler's watchdog is the last resort.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import structlog
from prometheus_client import Counter, Gauge, Histogram

from cronhooks_common import logs
from cronhooks_common.clock import Clock
from cronhooks_common.consumer import TRANSIENT, claim_event
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import CRON, Causation, Event, EventType, storable
from cronhooks_common.faults import ABANDONED
from cronhooks_common.signing import SecretKeys, signature_headers
from cronhooks_common.tokens import ApiTokens
from cronhooks_dispatcher import context_notes, health, lanes, payload, records, sender
from cronhooks_dispatcher.lookup import Lookup
from cronhooks_dispatcher.outcome import classify, import_outcome
from cronhooks_dispatcher.recording import INBOX, Health, Record, RecordWriter
from cronhooks_dispatcher.records import Attempt
from cronhooks_dispatcher.retry import next_attempt_at

log = structlog.get_logger(__name__)

MAX_LOGGED_RESPONSE = 64 << 10

ATTEMPTS = Counter("cronhooks_dispatcher_attempts_total", "HTTP attempts", ["outcome"])
DURATION = Histogram(
    "cronhooks_dispatcher_attempt_seconds",
    "Duration of HTTP attempts",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)
FIRE_LAG = Histogram(
    "cronhooks_dispatcher_fire_lag_seconds",
    "From a slot (plus its jitter offset) to the start of its first POST",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
IN_FLIGHT = Gauge("cronhooks_dispatcher_in_flight", "HTTP attempts in progress")


class SigningKeys:
    """The signing keys of each sealed secret, derived once. Opening a secret (Fernet) costs
    as much as signing the request; a herd signs with the same secrets over and over. Keyed
    by the ciphertext: a rotated secret is a new entry, the old one ages out."""

    def __init__(self, box: SecretBox, size: int = 20_000) -> None:
        self.of: Callable[[bytes], SecretKeys] = functools.lru_cache(maxsize=size)(
            lambda sealed: SecretKeys.of(box.open(sealed))
        )


@dataclass(frozen=True, slots=True)
class Dispatcher:
    pool: asyncpg.Pool
    http: aiohttp.ClientSession
    keys: SigningKeys
    tokens: ApiTokens
    api_url: str
    clock: Clock
    writer: RecordWriter
    allow_private: bool
    context: context_notes.ContextNoteLoader  # attachNotes (CONTRACT §13)

    async def handle(self, event: Event, found: Lookup) -> None:
        """`event` as the store holds it, and what the lookup found with it."""
        if event.type == EventType.DELIVERY_REQUESTED:
            await self._deliver(event, found)
        elif event.type in (EventType.NOTES_IMPORTED, EventType.NOTES_REJECTED):
            if event.data.get("attempt") is not None and not found.handled:  # not a token push
                await self._import_finished(event)
        elif event.type in (EventType.WEBHOOK_UPDATED, EventType.WEBHOOK_DELETED):
            on_change = (
                health.on_webhook_updated
                if event.type == EventType.WEBHOOK_UPDATED
                else health.on_webhook_deleted
            )
            alerts = self.writer.alerts
            async with self.pool.acquire() as conn, conn.transaction():
                resolved = await on_change(conn, event, INBOX, alerts, self.clock.now())
            alerts.committed([resolved] if resolved else [])
        elif event.type == EventType.DELIVERY_RELEASED:
            await self._deliver_released(event, found)
        elif event.type == EventType.DELIVERY_FAILED and event.actor != "dispatcher":
            # The scheduler cancelled a retry, or its watchdog abandoned the delivery: it
            # has ended without us. (Our own final failures released their lanes in the
            # transaction that recorded them.)
            await self._ended_elsewhere(event)

    async def _ended_elsewhere(self, event: Event) -> None:
        """A delivery another service ended no longer blocks its webhook (FORBID, DELAY) or
        its execution group; whoever waits for them goes next (lanes.py). An abandoned
        delivery counts as a failure for the webhook's health, once (inbox)."""
        d = event.data
        delivery_id, webhook_id = int(d["delivery_id"]), int(d["webhook_id"])
        raised: Event | None = None
        async with self.pool.acquire() as conn, conn.transaction():
            if not await claim_event(conn, INBOX, event):
                return
            await lanes.release(conn, [(webhook_id, delivery_id)], [delivery_id], self.clock.now())
            # An attempt that waited for the importer's verdict waits no more.
            await conn.execute(
                "delete from dispatcher.attempts where delivery_id = $1", delivery_id
            )
            if d.get("error") == ABANDONED:
                abandoned = Health(webhook_id, False, False, ABANDONED, d.get("kind", CRON))
                causation = Causation.following(event, actor="dispatcher")
                raised = await self.writer.count_failure(conn, abandoned, causation)
        self.writer.alerts.committed([raised] if raised else [])

    async def end_by_fault(self, event: Event, error: Exception) -> bool:
        """End the delivery a poison event (not handled yet) belongs to — the consumer's
        `on_poison`: it fails for good with `internal error: …` — not retried, as the same
        event would fail the same way — and releases its lanes. False for events that
        start nothing."""
        if event.type == EventType.DELIVERY_REQUESTED:
            request = event.data
        elif event.type == EventType.DELIVERY_RELEASED:
            request = lanes.released_request(event)
        elif event.type in (EventType.NOTES_IMPORTED, EventType.NOTES_REJECTED):
            row = await self._waiting_attempt(event)
            if row is None:
                return True  # no attempt waits for this verdict
            request = row["request"]
        else:
            return False
        now = self.clock.now()
        attempt = Attempt(request, now, "", None, None, 0)
        await self.writer.write(records.failed_by_fault(event, attempt, error, now, final=True))
        return True

    async def _forbidden(self, event: Event) -> bool:
        """FORBID: may this delivery start, or is an earlier one of its webhook pending?
        The pending row is taken in its own committed transaction, so two deliveries
        racing for it cannot both win."""
        request = event.data
        if request["target"].get("concurrency_policy") != "FORBID" or request["attempt"] != 1:
            return False
        holder: int = await self.pool.fetchval(
            """
            insert into dispatcher.pending (webhook_id, delivery_id) values ($1, $2)
            on conflict (webhook_id) do update set delivery_id = dispatcher.pending.delivery_id
            returning delivery_id
            """,
            request["webhook_id"],
            request["delivery_id"],
        )
        # A manual trigger runs regardless; only schedule slots are skipped.
        return bool(holder != request["delivery_id"] and request["trigger"] == "schedule")

    # --- one HTTP attempt ----------------------------------------------------------------

    async def _deliver(self, event: Event, found: Lookup) -> None:
        request = event.data
        with logs.bound(delivery_id=request["delivery_id"], webhook_id=request["webhook_id"]):
            if found.handled:
                return
            if await self._forbidden(event):
                await self.writer.write(records.skipped(event))
                return
            # DELAY and execution groups (lanes.py); other requests never get here.
            if lanes.admits(request) and not await lanes.admit(self.pool, event, self.clock.now()):
                return  # waits (delivery.queued) or was skipped, recorded by `admit`
            started_at = self.clock.now()
            if request["trigger"] == "schedule" and request.get("scheduled_for"):
                # From the time the slot was due to leave: the slot + its jitter offset.
                due = datetime.fromisoformat(request["scheduled_for"]) + timedelta(
                    milliseconds=request.get("jitter_offset_ms", 0)
                )
                FIRE_LAG.observe(max((started_at - due).total_seconds(), 0.0))
            await self._attempt(event, request, found.sealed_secret, started_at)

    async def _deliver_released(self, event: Event, found: Lookup) -> None:
        """A queued delivery's turn (lanes.py): its first attempt, after the release."""
        request = lanes.released_request(event)
        with logs.bound(delivery_id=request["delivery_id"], webhook_id=request["webhook_id"]):
            if found.handled:
                return
            await self._attempt(event, request, found.sealed_secret, self.clock.now())

    async def _attempt(
        self, event: Event, request: dict[str, Any], sealed: bytes | None, started_at: datetime
    ) -> None:
        """One HTTP attempt of `request`, recorded after `event` (the request, or the
        release of a queued delivery) on the delivery's stream."""
        if sealed is None:
            body = payload.build_body(
                request, timestamp=int(started_at.timestamp()), api_token=None, api_url=None
            )
            recorded = payload.redacted(body)
            result = sender.HttpResult(None, b"", "webhook has no secret", 0)
        else:
            IN_FLIGHT.inc()
            try:
                recorded, result = await self._send(request, self.keys.of(sealed), started_at)
            finally:
                IN_FLIGHT.dec()
        request_body, truncated = payload.cut(recorded)
        attempt = Attempt(
            request=request,
            started_at=started_at,
            request_body=request_body,
            request_body_truncated=truncated,
            response_status=result.status,
            response_body=(
                storable(result.body[:MAX_LOGGED_RESPONSE].decode("utf-8", "replace"))
                if result.status is not None
                else None
            ),
            duration_ms=result.duration_ms,
        )
        DURATION.observe(result.duration_ms / 1000)
        try:
            record = self._judged(event, attempt, result)
        except Exception as exc:  # whatever the agent sent, the attempt ends
            log.error("attempt_judging_failed", error=repr(exc))
            record = self._failed_by_fault(event, attempt, exc)
        try:
            await self.writer.write(record)
        except TRANSIENT:
            raise
        except Exception as exc:
            # The database refused the record: something in what the agent sent (or a bug
            # of ours). The attempt still ends, failed, without the bodies it came with.
            log.error("attempt_record_refused", error=repr(exc))
            await self.writer.write(self._failed_by_fault(event, attempt, exc))

    def _judged(self, event: Event, attempt: Attempt, result: sender.HttpResult) -> Record:
        outcome = classify(result)
        ATTEMPTS.labels("success" if outcome.succeeded else "failed").inc()
        if outcome.succeeded and outcome.changes is not None:
            return records.changes_received(event, attempt, outcome.changes)
        retry_at = next_attempt_at(attempt.number, result.retry_after, self.clock.now())
        return records.finished(event, attempt, outcome, retry_at)

    def _failed_by_fault(self, event: Event, attempt: Attempt, error: Exception) -> Record:
        retry_at = next_attempt_at(attempt.number, None, self.clock.now())
        return records.failed_by_fault(event, attempt, error, retry_at)

    async def _send(
        self, request: dict[str, Any], keys: SecretKeys, now: datetime
    ) -> tuple[str, sender.HttpResult]:
        """POST the signed request; (the body as recorded, what came back)."""
        target = request["target"]
        timestamp = int(now.timestamp())
        token = None
        if target.get("pass_api_key"):
            token = self.tokens.mint(
                webhook_id=request["webhook_id"],
                delivery_id=request["delivery_id"],
                depth=int(request.get("depth", 0)) + 1,
                read_patterns=target["read_patterns"],
                write_patterns=target["write_patterns"],
                now=now,
                max_depth=target.get("max_depth"),
            )
        # attachNotes: the notes as they are now, for this attempt (one query per batch of
        # sends; a webhook without attachNotes asks nothing).
        attach = context_notes.key_of(target)
        context = None if attach is None else await self.context.load(attach)
        body = payload.build_body(
            request, timestamp=timestamp, api_token=token, api_url=self.api_url, context=context
        )
        raw = payload.encode(body)
        headers = signature_headers(
            keys,
            delivery_id=str(request["delivery_id"]),
            timestamp=timestamp,
            body=raw,
            attempt=request["attempt"],
        )
        result = await sender.post(
            self.http,
            target["url"],
            body=raw,
            headers=headers,
            timeout_seconds=float(target["timeout_seconds"]),
            allow_private=self.allow_private,
        )
        return payload.recorded(body, raw), result

    async def _waiting_attempt(self, event: Event) -> asyncpg.Record | None:
        """The attempt an importer's verdict answers, kept while it waits for it."""
        row: asyncpg.Record | None = await self.pool.fetchrow(
            "select * from dispatcher.attempts where delivery_id = $1 and attempt = $2",
            event.data["delivery_id"],
            event.data["attempt"],
        )
        return row

    async def _import_finished(self, event: Event) -> None:
        """The importer applied or rejected an attempt's changes: finish that attempt."""
        row = await self._waiting_attempt(event)
        if row is None or row["outcome"] != "importing":
            return  # finished already (a redelivered verdict)
        attempt = Attempt(
            request=row["request"],
            started_at=row["started_at"],
            request_body=row["request_body"],
            request_body_truncated=row["request_body_truncated"],
            response_status=row["response_status"],
            response_body=row["response_body"],
            duration_ms=row["duration_ms"],
        )
        outcome = import_outcome(event.type, event.data)
        retry_at = next_attempt_at(attempt.number, None, self.clock.now())
        await self.writer.write(records.finished(event, attempt, outcome, retry_at))
