"""Handle `delivery.requested`: sign, POST, record the attempt and its outcome event.

The HTTP call runs outside any transaction; the outcome is recorded afterwards in one
transaction with the inbox row. If the process dies in between, the broker redelivers the
message and the agent sees the same (id, attempt) again: at least once, as promised.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
import asyncpg
import structlog
from prometheus_client import Counter, Histogram

from cronhooks_common import eventstore
from cronhooks_common.clock import Clock, iso
from cronhooks_common.consumer import already_handled, claim_event
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import Causation, Event, EventType, NewEvent
from cronhooks_common.signing import signature_headers, signing_key
from cronhooks_common.tokens import ApiTokens
from cronhooks_dispatcher import payload, sender
from cronhooks_dispatcher.outcome import Outcome, classify

log = structlog.get_logger(__name__)

INBOX = "dispatcher.inbox"
MAX_LOGGED_RESPONSE = 64 << 10

ATTEMPTS = Counter("cronhooks_dispatcher_attempts_total", "HTTP attempts", ["outcome"])
DURATION = Histogram(
    "cronhooks_dispatcher_attempt_seconds",
    "Duration of HTTP attempts",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)


@dataclass(frozen=True, slots=True)
class Dispatcher:
    pool: asyncpg.Pool
    http: aiohttp.ClientSession
    secrets: SecretBox
    tokens: ApiTokens
    api_url: str
    clock: Clock

    async def handle(self, event: Event) -> None:
        if event.type != EventType.DELIVERY_REQUESTED:
            return
        request = event.data
        with structlog.contextvars.bound_contextvars(
            delivery_id=request["delivery_id"], webhook_id=request["webhook_id"]
        ):
            async with self.pool.acquire() as conn:
                if await already_handled(conn, INBOX, event.event_id):
                    return
                sealed = await conn.fetchval(
                    "select ciphertext from shared.webhook_secrets where webhook_id = $1",
                    request["webhook_id"],
                )
            started_at = self.clock.now()
            if sealed is None:
                body = payload.build_body(
                    request, timestamp=int(started_at.timestamp()), api_token=None, api_url=None
                )
                result = sender.HttpResult(None, b"", "webhook has no secret", 0)
            else:
                body, result = await self._send(request, self.secrets.open(sealed), started_at)
            outcome = classify(result)
            await self._record(event, body, result, outcome, started_at)

    async def _send(
        self, request: dict[str, Any], secret: str, now: datetime
    ) -> tuple[dict[str, Any], sender.HttpResult]:
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
            )
        body = payload.build_body(
            request, timestamp=timestamp, api_token=token, api_url=self.api_url
        )
        raw = payload.encode(body)
        headers = signature_headers(
            signing_key(secret),
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
        )
        return body, result

    async def _record(
        self,
        event: Event,
        body: dict[str, Any],
        result: sender.HttpResult,
        outcome: Outcome,
        started_at: datetime,
    ) -> None:
        request = event.data
        status = "success" if outcome.succeeded else "failed"
        response_text = (
            result.body[:MAX_LOGGED_RESPONSE].decode("utf-8", "replace")
            if result.status is not None
            else None
        )
        request_text = payload.redacted(body)
        data = {
            "delivery_id": request["delivery_id"],
            "webhook_id": request["webhook_id"],
            "attempt": request["attempt"],
            "scheduled_for": request.get("scheduled_for"),
            "trigger": request["trigger"],
            "status": status,
            "response_status": result.status,
            "duration_ms": result.duration_ms,
            "error": outcome.error,
            "started_at": iso(started_at),
            "request_body": request_text,
            "response_body": response_text,
        }
        kind = EventType.DELIVERY_SUCCEEDED if outcome.succeeded else EventType.DELIVERY_FAILED
        async with self.pool.acquire() as conn, conn.transaction():
            if not await claim_event(conn, INBOX, event.event_id):
                return
            await conn.execute(
                """
                insert into dispatcher.attempts
                    (delivery_id, attempt, webhook_id, started_at, duration_ms, request_body,
                     response_status, response_body, error, outcome)
                values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                on conflict (delivery_id, attempt) do nothing
                """,
                request["delivery_id"],
                request["attempt"],
                request["webhook_id"],
                started_at,
                result.duration_ms,
                request_text,
                result.status,
                response_text,
                outcome.error,
                status,
            )
            await eventstore.append(
                conn,
                event.stream,
                [NewEvent(kind, data)],
                expected_version=event.version,
                causation=Causation.following(event, actor="dispatcher"),
                occurred_at=self.clock.now(),
            )
        ATTEMPTS.labels(status).inc()
        DURATION.observe(result.duration_ms / 1000)
        log.info(
            "delivery_attempted",
            attempt=request["attempt"],
            status=status,
            response_status=result.status,
            duration_ms=result.duration_ms,
            error=outcome.error,
        )
