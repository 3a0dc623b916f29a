"""Call an agent back for a due one-shot trigger (CONTRACT §9).

For each `trigger.requested` attempt: a fresh JWT signed with the active key of
CRONHOOKS_FIRE_JWT_ALGORITHM (RS256 by default; `kid` in the header; `iss`
CRONHOOKS_PUBLIC_URL, `aud` agent:{instanceId}, `purpose` cron_fire, `job_id`, `fire_at`,
`iat`, `nbf`, `exp` 60 s later, `jti`), POST `{callback}/api/cron/fire` with
`{"job_id", "fire_at"}`. Both `fire_at`s are the string exactly as the agent provisioned
it (`fire_at_text` of the event), so the agent can match the fire to what it armed.
A 2xx ends the trigger (`trigger.fired`, outcome delivered). Anything else is tried again
with backoff (2 s, 4 s, … capped at 60 s; the agent's `Retry-After` wins, read as for
deliveries: at most an hour, unreadable → the backoff) while the next attempt would start
within 15 minutes of `fire_at` (CONTRACT §15); else at once `trigger.fired` with outcome
failed, its error saying why. Retries are scheduler timers, like delivery retries. A fire
that cannot be handled at all (a bug of ours) ends `failed` too (`end_by_fault`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import aiohttp
import asyncpg
import structlog
from msgspec.structs import asdict
from prometheus_client import Counter

from cronhooks_common import logs
from cronhooks_common.clock import Clock, iso
from cronhooks_common.crypto import SecretBox
from cronhooks_common.events import (
    ArmedFields,
    Event,
    NewEvent,
    TriggerAttemptFailed,
    TriggerFired,
    TriggerRequested,
)
from cronhooks_common.faults import internal_error
from cronhooks_common.keys import SigningKey, active_key
from cronhooks_common.signing import USER_AGENT
from cronhooks_dispatcher import sender
from cronhooks_dispatcher.deps import Call, Fault
from cronhooks_dispatcher.record import Record, RecordWriter
from cronhooks_dispatcher.retry import wait_before

log = structlog.get_logger(__name__)

TOKEN_LIFETIME = timedelta(seconds=60)
FIRE_WINDOW = timedelta(minutes=15)
TOO_LATE = "not retried: the next attempt would start more than 15 minutes after fire_at"
ATTEMPT_TIMEOUT = 30.0
KEY_REFRESH = timedelta(seconds=30)

FIRES = Counter("cronhooks_dispatcher_fire_attempts_total", "Trigger callbacks", ["outcome"])


def fire_backoff(attempt: int) -> timedelta:
    return timedelta(seconds=min(2**attempt, 60))


def provisioned_fire_at(fire: ArmedFields) -> str:
    """`fire_at` as the agent spelled it; triggers armed before rev. 2 only have the
    normalised form."""
    text = fire.fire_at_text
    return text if isinstance(text, str) else fire.fire_at


async def call_back(call: Call, event: Event, fire: TriggerRequested) -> None:
    """`trigger.requested`: one attempt to call the agent back."""
    with logs.bound(job_id=fire.job_id, fire_id=fire.fire_id):
        if not call.handled:
            await call.deps.fires.call(event, fire)


async def fail_fire(fault: Fault, event: Event, fire: TriggerRequested) -> None:
    """End a fire (not handled yet) that could not be handled — the consumer's poison
    hook: its trigger leaves `armed`, failed, saying `internal error: …`."""
    await fault.deps.fires.end_by_fault(event, fire, fault.error)


@dataclass
class FireCaller:
    """Calls agents back; keeps the active signing key, re-read now and then."""

    pool: asyncpg.Pool
    http: aiohttp.ClientSession
    box: SecretBox
    clock: Clock
    algorithm: str
    writer: RecordWriter
    issuer: str
    allow_private: bool
    _key: SigningKey | None = field(default=None, init=False)
    _key_loaded: datetime | None = field(default=None, init=False)
    _key_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def _key_fresh(self, now: datetime) -> bool:
        return self._key_loaded is not None and now - self._key_loaded <= KEY_REFRESH

    async def signing_key(self, now: datetime) -> SigningKey:
        # Re-read now and then, so that `cronhooks keys rotate` takes effect everywhere
        # (the retired key stays published far longer than this). One reader at a time:
        # a burst of fires finding the key stale would otherwise all read it at once.
        if self._key is None or not self._key_fresh(now):
            async with self._key_lock:
                if self._key is None or not self._key_fresh(now):
                    async with self.pool.acquire() as conn:
                        self._key = await active_key(
                            conn, self.box, algorithm=self.algorithm, now=now
                        )
                    self._key_loaded = now
        return self._key

    def token(self, key: SigningKey, fire: TriggerRequested, now: datetime) -> str:
        issued = int(now.timestamp())
        return key.sign(
            {
                "iss": self.issuer,
                "aud": f"agent:{fire.instance_id}",
                "purpose": "cron_fire",
                "job_id": fire.job_id,
                "fire_at": provisioned_fire_at(fire),
                "iat": issued,
                "nbf": issued,
                "exp": issued + int(TOKEN_LIFETIME.total_seconds()),
                "jti": uuid.uuid4().hex,
            }
        )

    async def call(self, event: Event, fire: TriggerRequested) -> None:
        """POST the fire to the agent and record what came back."""
        now = self.clock.now()
        body = json.dumps({"job_id": fire.job_id, "fire_at": provisioned_fire_at(fire)}).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Authorization": f"Bearer {self.token(await self.signing_key(now), fire, now)}",
        }
        result = await sender.post(
            self.http,
            fire.callback_url.rstrip("/") + "/api/cron/fire",
            body=body,
            headers=headers,
            timeout_seconds=ATTEMPT_TIMEOUT,
            allow_private=self.allow_private,
        )
        await self.writer.write(self._record(event, fire, result))

    def _record(self, event: Event, fire: TriggerRequested, result: sender.HttpResult) -> Record:
        now = self.clock.now()
        outcome: TriggerFired | TriggerAttemptFailed
        if result.error is None and 200 <= (result.status or 0) < 300:
            error = None
            outcome = TriggerFired(
                **asdict(fire),
                status=result.status,
                error=None,
                duration_ms=result.duration_ms,
                outcome="delivered",
            )
        else:
            error = result.error or f"HTTP {result.status}"
            retry_at = now + wait_before(result.retry_after, now, fire_backoff(fire.attempt))
            if retry_at <= datetime.fromisoformat(fire.fire_at) + FIRE_WINDOW:
                outcome = TriggerAttemptFailed(
                    **asdict(fire),
                    status=result.status,
                    error=error,
                    duration_ms=result.duration_ms,
                    retry_at=iso(retry_at),
                    next_attempt=fire.attempt + 1,
                )
            else:
                outcome = TriggerFired(
                    **asdict(fire),
                    status=result.status,
                    error=f"{error}; {TOO_LATE}",
                    duration_ms=result.duration_ms,
                    outcome="failed",
                )
        FIRES.labels("failed" if error else "delivered").inc()
        log.info(
            "trigger_attempted",
            attempt=fire.attempt,
            status=result.status,
            error=error,
            final=isinstance(outcome, TriggerFired),
        )
        return Record(cause=event, event=NewEvent.of(outcome))

    async def end_by_fault(self, event: Event, fire: TriggerRequested, error: Exception) -> None:
        failed = TriggerFired(
            **asdict(fire),
            status=None,
            error=internal_error(error),
            duration_ms=0,
            outcome="failed",
        )
        await self.writer.write(Record(cause=event, event=NewEvent.of(failed)))
