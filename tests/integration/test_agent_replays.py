"""A fire JWT is accepted once (CONTRACT §15 "Replays"), with the platform's real fires:
a replayed request is refused by the replica that took it, a replica with its own
verifier accepts it but the shared claim store keeps the job from running twice, and
the platform's retry (a fresh JWT) gets through."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from cronhooks_agent import FireVerifier, SqliteClaimStore
from tests.support.flows import create_agent, provision
from tests.support.inprocess import eventually
from tests.support.sdk_agent import SdkAgent
from tests.support.system import System


def replica(system: System, store: Path, **kw: Any) -> SdkAgent:
    """An agent process: its own verifier (and record of jtis), the shared claim store."""
    verifier = FireVerifier(
        jwks_url=f"{system.urls['admin-api']}/.well-known/jwks.json",
        audience="agent:replays",
        issuer=system.settings.public_url,
    )
    return SdkAgent(verifier=verifier, store=SqliteClaimStore(store), **kw)


async def register(system: System, agent: SdkAgent) -> str:
    """A platform agent that calls `agent` back: its access token."""
    token, _ = await create_agent(system, system.admin, agent.url, "replays")
    return token


def authorization(request: dict[str, object]) -> str:
    headers = request["headers"]
    assert isinstance(headers, dict)
    return str(headers["Authorization"])


async def replay(target: SdkAgent, request: dict[str, object]) -> int:
    """Send a recorded fire request again, byte for byte."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{target.url}/api/cron/fire",
            data=request["body"],
            headers={"Authorization": authorization(request), "Content-Type": "application/json"},
        ) as resp,
    ):
        return resp.status


async def test_a_replayed_fire_is_refused_and_never_runs_the_job_again(
    system: System, tmp_path: Path
) -> None:
    one = await replica(system, tmp_path / "claims.db").start()
    two = await replica(system, tmp_path / "claims.db").start()
    try:
        await provision(
            system,
            await register(system, one),
            job_id="once",
            fire_at=system.clock.now().isoformat(),
        )
        await one.wait_runs(1)
        fire = one.requests[-1]
        assert await replay(one, fire) == 401  # this replica accepted that token already
        assert await replay(two, fire) == 202  # never seen here: the claim store decides
        assert await replay(two, fire) == 401
        await asyncio.sleep(0.2)
        assert len(one.runs) + len(two.runs) == 1
        assert one.statuses == [202, 401] and two.statuses == [202, 401]
    finally:
        await one.stop()
        await two.stop()


async def test_the_platforms_retry_is_a_fresh_token_and_gets_through(
    system: System, tmp_path: Path
) -> None:
    # Fire JWTs carry the platform clock's time and agents check them against theirs:
    # start a minute back, so that after the 60 s Retry-After both agree again.
    system.clock.set(datetime.now(UTC) - timedelta(seconds=59))
    ready = asyncio.Event()
    agent = replica(system, tmp_path / "claims.db", ready=ready, ready_timeout=0.2)
    await agent.start()
    try:
        await provision(
            system,
            await register(system, agent),
            job_id="wake",
            fire_at=system.clock.now().isoformat(),
        )
        await eventually(lambda: _answered(agent, [503]))
        ready.set()
        system.clock.advance(timedelta(seconds=60))  # the platform retries after Retry-After
        await agent.wait_runs(1)
        first, second = (authorization(request) for request in agent.requests)
        assert first != second and agent.statuses == [503, 202]
    finally:
        await agent.stop()


async def _answered(agent: SdkAgent, statuses: list[int]) -> bool:
    return agent.statuses == statuses
