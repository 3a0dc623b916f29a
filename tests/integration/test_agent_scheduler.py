"""The SDK's AgentScheduler against the running platform: recurring jobs re-arm after each
run, repeat=N stops cleanly, a refused token degrades to an in-process ticker once, and a
transient failure just waits for the next reconcile."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from cronhooks_agent import AgentScheduler, CronClient, FireVerifier, Job, SqliteClaimStore
from tests.support.flows import create_agent
from tests.support.inprocess import eventually
from tests.support.sdk_agent import SdkAgent
from tests.support.system import System


@pytest.mark.system(start=lambda: datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=100))
async def test_recurring_and_repeat_jobs_rearm_and_stop(system: System, tmp_path: Path) -> None:
    verifier = FireVerifier(
        jwks_url=f"{system.urls['admin-api']}/.well-known/jwks.json",
        audience="agent:sched",
        issuer=system.settings.public_url,
    )
    ran: list[str] = []

    async def work_a() -> None:
        ran.append("every")

    async def work_b() -> None:
        ran.append("twice")

    agent = SdkAgent(verifier=verifier, store=SqliteClaimStore(tmp_path / "c.db"))
    await agent.start()
    token, _ = await create_agent(system, system.admin, agent.url, "sched")
    scheduler = AgentScheduler(
        CronClient(system.urls["admin-api"], token), agent.url, now=system.clock.now
    )
    scheduler.add(Job("every", work_a, every=timedelta(seconds=20)))
    scheduler.add(Job("twice", work_b, every=timedelta(seconds=20), repeat=2))
    agent.on_fire = scheduler.run
    diff = await scheduler.start()
    assert diff is not None and sorted(diff.armed) == ["every", "twice"]
    for round_ in (1, 2, 3):
        system.clock.advance(timedelta(seconds=20))
        # Both jobs' fires of this round have run (each re-arms from the clock's now)
        # before the clock moves on; "twice" has no third round.
        await eventually(lambda n=round_: _count(ran, "every", n))
        await eventually(lambda n=round_: _count(ran, "twice", min(n, 2)))
    assert ran.count("twice") == 2  # stopped after two runs

    async def armed_jobs() -> bool:
        return {j["job_id"] for j in await scheduler._client.list()} == {"every"}

    await eventually(armed_jobs)  # re-armed after its run; the finished job is not
    await agent.stop()


async def _count(ran: list[str], name: str, n: int) -> bool:
    return ran.count(name) >= n


# Both revoke the token for good: 403 invalid_client (CONTRACT §9).
REVOKE = {
    "deleted": "mutation($id: Int!) { deleteAgent(id: $id) { id } }",
    "rotated": "mutation($id: Int!) { rotateAgentToken(id: $id) { accessToken } }",
}


@pytest.mark.parametrize("revoked", sorted(REVOKE))
@pytest.mark.system(services=("admin-api",))
async def test_a_refused_token_falls_back_to_a_local_ticker_once(
    system: System, revoked: str
) -> None:
    token, agent_id = await create_agent(system, system.admin, "http://127.0.0.1:9/", "gone")
    _, answer = await system.graphql(system.admin, REVOKE[revoked], {"id": agent_id})
    assert "errors" not in answer, answer
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    scheduler = AgentScheduler(CronClient(system.urls["admin-api"], token), "http://127.0.0.1:9/")
    scheduler.add(Job("soon", work, at=datetime.now(UTC) + timedelta(milliseconds=200)))
    with structlog.testing.capture_logs() as logs:
        assert await scheduler.start() is None
        assert await scheduler.reconcile() is None  # no second call, no second warning
    assert scheduler.degraded
    warnings = [e for e in logs if e["event"] == "managed_cron_refused"]
    assert len(warnings) == 1 and "invalid_client" in warnings[0]["error"]
    await asyncio.wait_for(ran.wait(), 5)  # the in-process ticker ran the job
    await scheduler.stop()


async def test_a_transient_failure_waits_for_the_next_reconcile() -> None:
    async def work() -> None:
        pass

    scheduler = AgentScheduler(CronClient("http://127.0.0.1:9", "chg_x"), "http://127.0.0.1:9/")
    scheduler.add(Job("j", work, every=timedelta(minutes=1)))
    with structlog.testing.capture_logs() as logs:
        assert await scheduler.start() is None
    assert not scheduler.degraded
    assert [e["event"] for e in logs] == ["managed_cron_unavailable"]


@pytest.mark.parametrize("cron", ["*/5 * * * *"])
def test_cron_jobs_compute_their_next_fire(cron: str) -> None:
    async def work() -> None:
        pass

    job = Job("c", work, cron=cron)
    job.advance(datetime(2026, 2, 9, 9, 2, tzinfo=UTC))
    assert job.next_at == datetime(2026, 2, 9, 9, 5, tzinfo=UTC)
