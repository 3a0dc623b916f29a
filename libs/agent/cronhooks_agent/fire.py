"""Receive managed one-shot fires: `POST /api/cron/fire` from cronhooks (CONTRACT §9).

`FireVerifier` checks the platform's JWT with PyJWT's `PyJWKClient` against the JWKS
(`{platform}/.well-known/jwks.json`): signature (RS256/384/512, ES256/384 or EdDSA, as
the platform's CRONHOOKS_FIRE_JWT_ALGORITHM chose), `aud` (agent:{instance}), `iss`,
`exp`/`nbf` with 30 s leeway, a `jti`, and `purpose == "cron_fire"` — a general token is
refused. `fire_handler` also checks that the token is for the body's `job_id` and
`fire_at` (a token cannot be replayed with another body) and accepts each token once
(CONTRACT §15): the verifier remembers the `jti`s it accepted until their tokens expire,
so a replayed request is refused, while the platform's retries, each a fresh JWT with a
new `jti`, get through. It answers 202 at once and runs the job in the background, after
claiming (job_id, fire_at) in a store, so that repeated fires run the job at most once —
also across replicas, whose verifiers each remember only what they saw themselves.
"""

from __future__ import annotations

import asyncio
import heapq
import threading
import time
from collections.abc import Awaitable, Callable, Mapping

import jwt
import structlog
from aiohttp import web

from cronhooks_agent.claims import ClaimStore
from cronhooks_common.clock import wait_set
from cronhooks_common.json_input import TooDeep, loads

log = structlog.get_logger(__name__)

LEEWAY_SECONDS = 30
# Asymmetric algorithms only: with HS* a public key could be abused as an HMAC secret.
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "EdDSA"]
# Accepted jtis a verifier keeps at most. The platform signs at most a few fires a minute
# per agent and a token lives 2 minutes, so this is never reached by real traffic.
MAX_REMEMBERED_JTIS = 10_000


class FireAuthError(Exception):
    """The fire JWT is missing, forged, expired, for another agent or another purpose, or
    was accepted before (a replay)."""


class _SeenTokens:
    """The jtis of accepted tokens, each until its forget time, at most `limit` of them."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("must remember at least one jti")
        self._limit = limit
        self._forget_at: dict[str, float] = {}
        self._queue: list[tuple[float, str]] = []  # a heap: the soonest to forget first
        # Callers may check from several threads (verify_sync is made for worker threads):
        # check-and-record is atomic, or two copies of one token arriving together could
        # both pass.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._forget_at)

    def first_sight(self, jti: str, forget_at: float, now: float) -> bool:
        """Record `jti` until `forget_at`; False if it is recorded already."""
        with self._lock:
            self._forget(now)
            if jti in self._forget_at:
                return False
            if len(self._forget_at) >= self._limit:
                # Full: drop the entry closest to expiring anyway. Its token could then be
                # replayed in what is left of its life, and the claim store would still
                # keep the job from running twice.
                _, soonest = heapq.heappop(self._queue)
                del self._forget_at[soonest]
            self._forget_at[jti] = forget_at
            heapq.heappush(self._queue, (forget_at, jti))
            return True

    def _forget(self, now: float) -> None:
        while self._queue and self._queue[0][0] <= now:
            _, jti = heapq.heappop(self._queue)
            del self._forget_at[jti]


class FireVerifier:
    """Verifies fire JWTs (`verify`) and accepts each token once (`accept_once`).

    The record of accepted jtis is in memory, per verifier: one per process is right, as
    a replica that restarts has lost only what the claim store still guards.
    """

    def __init__(
        self,
        *,
        jwks_url: str,
        audience: str,
        issuer: str,
        max_remembered: int = MAX_REMEMBERED_JTIS,
    ) -> None:
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300)
        self._audience = audience
        self._issuer = issuer
        self._seen = _SeenTokens(max_remembered)

    def verify_sync(self, token: str) -> dict[str, object]:
        """The token's claims if it is a valid fire JWT for this agent, else FireAuthError.
        Records nothing: the same token verifies again (see `accept_once`). PyJWT checked
        the registered claims it requires, this the purpose; any other claim (`job_id`,
        `fire_at`) is as signed, to be checked where read."""
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            claims: dict[str, object] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "nbf", "aud", "iss", "jti"]},
            )
        except (jwt.PyJWTError, ValueError) as exc:
            raise FireAuthError(str(exc)) from None
        if claims.get("purpose") != "cron_fire":
            raise FireAuthError("not a cron_fire token")
        return claims

    async def verify(self, token: str) -> dict[str, object]:
        # PyJWKClient fetches the JWKS with blocking urllib: keep it off the event loop.
        return await asyncio.to_thread(self.verify_sync, token)

    def accept_once(self, claims: Mapping[str, object]) -> None:
        """Record the `jti` of verified `claims`; FireAuthError if this verifier accepted it
        before. It is kept until the token's `exp` plus the leeway has passed (verify
        refuses the token from then on) and at most `max_remembered` are kept."""
        jti, exp = claims.get("jti"), claims.get("exp")
        if not isinstance(jti, str) or not jti:
            raise FireAuthError("the token has no jti")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise FireAuthError("the token has no numeric exp")
        if not self._seen.first_sight(jti, exp + LEEWAY_SECONDS, time.time()):
            raise FireAuthError(f"token {jti} was presented before (a replay)")

    @property
    def remembered(self) -> int:
        """How many accepted jtis are remembered now (expired ones go on the next check)."""
        return len(self._seen)


Runner = Callable[[str, str], Awaitable[None]]


def fire_handler(
    *,
    verifier: FireVerifier,
    store: ClaimStore,
    run: Runner,
    ready: asyncio.Event | None = None,
    ready_timeout: float = 7.0,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler for `POST /api/cron/fire`.

    401 on any token problem (also a token for another `job_id` or `fire_at` than the
    body's, and a token accepted before: a replay), 400 without `job_id` (or for a body
    nested deeper than 64 levels, which nothing parses further), 503 with
    `Retry-After: 60` if `ready` is not set within `ready_timeout` seconds (the platform
    retries, with a fresh token), else 202 at once.
    """
    running: set[asyncio.Task[None]] = set()

    async def handle(request: web.Request) -> web.Response:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return web.json_response({"error": "missing bearer token"}, status=401)
        try:
            claims = await verifier.verify(token.strip())
        except FireAuthError as exc:
            return web.json_response({"error": f"invalid token: {exc}"}, status=401)
        try:
            body = loads(await request.read(), what="request body")
        except TooDeep as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except ValueError:
            body = None
        job_id = body.get("job_id") if isinstance(body, dict) else None
        if not isinstance(job_id, str) or not job_id:
            return web.json_response({"error": "job_id is required"}, status=400)
        if claims.get("job_id") not in (None, job_id):
            return web.json_response({"error": "token is for another job"}, status=401)
        fire_at = str(body.get("fire_at", "")) if isinstance(body, dict) else ""
        if claims.get("fire_at") != fire_at:
            return web.json_response({"error": "token is for another fire_at"}, status=401)
        # Only now, for a token that authorizes this very request: one sent with another
        # body was refused above and has not used up its jti.
        try:
            verifier.accept_once(claims)
        except FireAuthError as exc:
            return web.json_response({"error": f"invalid token: {exc}"}, status=401)
        if ready is not None and not ready.is_set() and not await wait_set(ready, ready_timeout):
            return web.json_response(
                {"error": "agent not ready; retry"}, status=503, headers={"Retry-After": "60"}
            )
        if await store.claim(job_id, fire_at):
            task = asyncio.create_task(_run(run, job_id, fire_at))
            running.add(task)
            task.add_done_callback(running.discard)
        else:
            log.info("fire_already_claimed", job_id=job_id, fire_at=fire_at)
        return web.json_response({"status": "accepted", "job_id": job_id}, status=202)

    return handle


async def _run(run: Runner, job_id: str, fire_at: str) -> None:
    try:
        await run(job_id, fire_at)
    except Exception:
        log.exception("job_failed", job_id=job_id, fire_at=fire_at)
