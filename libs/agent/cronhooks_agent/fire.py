"""Receive managed one-shot fires: `POST /api/cron/fire` from cronhooks (CONTRACT §9).

`FireVerifier` checks the platform's JWT with PyJWT's `PyJWKClient` against the JWKS
(`{platform}/.well-known/jwks.json`): signature (RS256/384/512, ES256/384 or EdDSA, as
the platform's CRONHOOKS_FIRE_JWT_ALGORITHM chose), `aud` (agent:{instance}), `iss`,
`exp`/`nbf` with 30 s leeway, and `purpose == "cron_fire"` — a general token is refused.
`fire_handler` also checks that the token is for the body's `job_id` and `fire_at` (a
token cannot be replayed with another body), answers 202 at once and runs the job in the
background, after claiming (job_id, fire_at) in a store, so that repeated fires run the
job at most once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import jwt
import structlog
from aiohttp import web

from cronhooks_agent.claims import ClaimStore

log = structlog.get_logger(__name__)

LEEWAY_SECONDS = 30
# Asymmetric algorithms only: with HS* a public key could be abused as an HMAC secret.
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "EdDSA"]


class FireAuthError(Exception):
    """The fire JWT is missing, forged, expired, for another agent or another purpose."""


class FireVerifier:
    def __init__(self, *, jwks_url: str, audience: str, issuer: str) -> None:
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300)
        self._audience = audience
        self._issuer = issuer

    def verify_sync(self, token: str) -> dict[str, Any]:
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "nbf", "aud", "iss"]},
            )
        except (jwt.PyJWTError, ValueError) as exc:
            raise FireAuthError(str(exc)) from None
        if claims.get("purpose") != "cron_fire":
            raise FireAuthError("not a cron_fire token")
        return claims

    async def verify(self, token: str) -> dict[str, Any]:
        # PyJWKClient fetches the JWKS with blocking urllib: keep it off the event loop.
        return await asyncio.to_thread(self.verify_sync, token)


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
    body's), 400 without `job_id`, 503 with `Retry-After: 60` if `ready`
    is not set within `ready_timeout` seconds (the platform retries), else 202 at once.
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
            body = json.loads(await request.read())
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
        if ready is not None and not ready.is_set():
            try:
                await asyncio.wait_for(ready.wait(), ready_timeout)
            except TimeoutError:
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
