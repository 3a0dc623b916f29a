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
consecutive failures disable it.

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
from cronhooks_common.clock import Clock, iso
from cronhooks_common.consumer import TRANSIENT, claim_event
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import CRON, Causation, Event, EventType, NewEvent, storable
from cronhooks_common.faults import ABANDONED, internal_error
from cronhooks_common.signing import SecretKeys, signature_headers
from cronhooks_common.tokens import ApiTokens
from cronhooks_dispatcher import context_notes, health, lanes, payload, sender
from cronhooks_dispatcher.lookup import Lookup
from cronhooks_dispatcher.outcome import Outcome, classify, import_outcome
from cronhooks_dispatcher.recording import INBOX, Health, Record, RecordWriter
from cronhooks_dispatcher.recording import Attempt as AttemptRow
from cronhooks_dispatcher.retry import next_attempt_at

log = structlog.get_logger(__name__)

MAX_LOGGED_RESPONSE = 64 << 10

ATTEMPTS = Counter("cronhooks_dispatcher_attempts_total", "HTTP attempts", ["outcome"])
DELIVERIES = Counter("cronhooks_dispatcher_deliveries_total", "Finished deliveries", ["outcome"])
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


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one HTTP attempt sent and got: the attempt log row and the outcome event data."""

    request: dict[str, Any]  # the delivery.requested data
    started_at: datetime
    request_body: str  # as sent, api_token redacted, cut at 64 KiB
    response_status: int | None
    response_body: str | None
    duration_ms: int
    request_body_truncated: bool = False

    @property
    def delivery_id(self) -> int:
        return int(self.request["delivery_id"])

    @property
    def number(self) -> int:
        return int(self.request["attempt"])


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
                raised = await health.record_failure(
                    conn,
                    webhook_id=webhook_id,
                    gone=False,
                    error=ABANDONED,
                    kind=d.get("kind", CRON),
                    disable_after=self.writer.auto_disable_after,
                    alerts=self.writer.alerts,
                    causation=Causation.following(event, actor="dispatcher"),
                    now=self.clock.now(),
                )
        self.writer.alerts.committed([raised] if raised else [])

    async def end_by_fault(self, event: Event, found: Lookup, error: Exception) -> bool:
        """End the delivery a poison event belongs to (the consumer's `on_poison`): it
        fails for good with `internal error: …` — not retried, as the same event would
        fail the same way — and releases its lanes. False for events that start nothing."""
        if found.handled:
            return True
        if event.type == EventType.DELIVERY_REQUESTED:
            request = event.data
        elif event.type == EventType.DELIVERY_RELEASED:
            request = lanes.released_request(event)
        elif event.type in (EventType.NOTES_IMPORTED, EventType.NOTES_REJECTED):
            row = await self.pool.fetchrow(
                "select request from dispatcher.attempts where delivery_id = $1 and attempt = $2",
                event.data["delivery_id"],
                event.data["attempt"],
            )
            if row is None:
                return True  # no attempt waits for this verdict
            request = row["request"]
        else:
            return False
        now = self.clock.now()
        attempt = Attempt(request, now, "", None, None, 0)
        outcome = Outcome(False, internal_error(error))
        await self.writer.write(self._finish(event, attempt, outcome, now, final=True))
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

    def _skipped(self, event: Event) -> Record:
        data = {
            **_delivery_fields(event.data),
            "attempt": 0,
            "status": "skipped",
            "reason": "concurrency",
            "skipped_count": 1,
            "policy": "FORBID",
        }
        log.info("delivery_skipped", reason="concurrency")
        return Record(
            cause=event,
            event=NewEvent(EventType.DELIVERY_SKIPPED, data),
        )

    # --- one HTTP attempt ----------------------------------------------------------------

    async def _deliver(self, event: Event, found: Lookup) -> None:
        request = event.data
        with logs.bound(delivery_id=request["delivery_id"], webhook_id=request["webhook_id"]):
            if found.handled:
                return
            if await self._forbidden(event):
                await self.writer.write(self._skipped(event))
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
            return self._changes(event, attempt, outcome.changes)
        retry_at = next_attempt_at(attempt.number, result.retry_after, self.clock.now())
        return self._finish(event, attempt, outcome, retry_at)

    def _failed_by_fault(self, event: Event, attempt: Attempt, error: Exception) -> Record:
        """A failed attempt saying `internal error: …`, retried as usual; of what came
        back only the status is kept."""
        bare = Attempt(
            attempt.request,
            attempt.started_at,
            storable(attempt.request_body),
            attempt.response_status,
            None,
            attempt.duration_ms,
            attempt.request_body_truncated,
        )
        retry_at = next_attempt_at(attempt.number, None, self.clock.now())
        return self._finish(event, bare, Outcome(False, internal_error(error)), retry_at)

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

    # --- recording (each runs inside a group-committed savepoint) -------------------------

    @staticmethod
    def _row(attempt: Attempt, outcome: str, error: str | None) -> AttemptRow:
        return AttemptRow(
            delivery_id=attempt.delivery_id,
            attempt=attempt.number,
            webhook_id=int(attempt.request["webhook_id"]),
            started_at=attempt.started_at,
            duration_ms=attempt.duration_ms,
            request_body=attempt.request_body,
            request_body_truncated=attempt.request_body_truncated,
            response_status=attempt.response_status,
            response_body=attempt.response_body,
            error=error,
            outcome=outcome,
            request=attempt.request,
        )

    def _changes(self, event: Event, attempt: Attempt, changes: list[Any]) -> Record:
        request = attempt.request
        data = {
            **_delivery_fields(request),
            "changes": changes,
            "write_patterns": request["target"]["write_patterns"],
            "max_depth": request["target"].get("max_depth", 1),
            # Written one deeper than what the delivery answers (CONTRACT §4, §11): a cron
            # slot is depth 0, a change delivery the depth of its note batch.
            "depth": int(request.get("depth", 0)) + 1,
        }
        return Record(
            cause=event,
            event=NewEvent(EventType.DELIVERY_CHANGES_RECEIVED, data),
            attempt=self._row(attempt, "importing", None),
        )

    async def _import_finished(self, event: Event) -> None:
        """The importer applied or rejected an attempt's changes: finish that attempt."""
        row = await self.pool.fetchrow(
            "select * from dispatcher.attempts where delivery_id = $1 and attempt = $2",
            event.data["delivery_id"],
            event.data["attempt"],
        )
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
        await self.writer.write(self._finish(event, attempt, outcome, retry_at))

    def _finish(
        self,
        cause: Event,
        attempt: Attempt,
        outcome: Outcome,
        retry_at: datetime,
        *,
        final: bool = False,
    ) -> Record:
        """The record of a finished attempt and the event it leads to, after `cause` (the
        request, or the importer's verdict) on the same stream. `final`: no retry, whatever
        attempts are left."""
        request = attempt.request
        max_retries = int(request["target"].get("max_retries", 0))
        final = final or outcome.succeeded or outcome.gone or attempt.number > max_retries
        status = "success" if outcome.succeeded else "failed"
        data: dict[str, Any] = {
            **_delivery_fields(request),
            "status": status,
            "response_status": attempt.response_status,
            "duration_ms": attempt.duration_ms,
            "error": outcome.error,
            "started_at": iso(attempt.started_at),
            "request_body": attempt.request_body,
            "response_body": attempt.response_body,
        }
        if attempt.request_body_truncated:  # only when cut, like context_truncated
            data["request_body_truncated"] = True
        if outcome.succeeded:
            kind = EventType.DELIVERY_SUCCEEDED
        elif final:
            kind = EventType.DELIVERY_FAILED
        else:
            kind = EventType.DELIVERY_ATTEMPT_FAILED
            data["retry_at"] = iso(retry_at)
            data["next_attempt"] = attempt.number + 1
        if final:
            DELIVERIES.labels(status).inc()
        log.info(
            "delivery_attempted",
            attempt=attempt.number,
            status=status,
            final=final,
            response_status=attempt.response_status,
            duration_ms=attempt.duration_ms,
            error=outcome.error,
        )
        webhook_id = int(request["webhook_id"])
        return Record(
            cause=cause,
            event=NewEvent(kind, data),
            attempt=self._row(attempt, status, outcome.error),
            release=(webhook_id, attempt.delivery_id) if final else None,
            group_release=final and lanes.may_hold_group(request),
            health=Health(
                webhook_id,
                outcome.succeeded,
                outcome.gone,
                outcome.error,
                request.get("kind", CRON),
            )
            if final
            else None,
        )


def _delivery_fields(request: dict[str, Any]) -> dict[str, Any]:
    """The fields every `delivery.*` event carries (CONTRACT §6)."""
    return {
        "delivery_id": request["delivery_id"],
        "webhook_id": request["webhook_id"],
        "kind": request.get("kind", CRON),
        "attempt": request["attempt"],
        "scheduled_for": request.get("scheduled_for"),
        "trigger": request["trigger"],
        "missed_count": request.get("missed_count", 0),
    }
