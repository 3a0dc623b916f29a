"""Managed one-shot triggers end to end (CONTRACT §9): agents provision over HTTP, the
platform calls them back with a JWT that the SDK — and a verifier written like hermes'
Chronos one — verifies with PyJWKClient against the JWKS; on the running services with a
controlled clock and SDK agents on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import jwt
import pytest

from cronhooks_agent import CronClient, FireVerifier, SqliteClaimStore
from cronhooks_common import db
from cronhooks_common.clock import ManualClock
from cronhooks_common.crypto import SecretBox
from cronhooks_common.keys import active_key, published_jwks
from cronhooks_common.settings import Settings
from cronhooks_dispatcher.fire import FireCaller
from tests.support.flows import agent_cron, create_agent
from tests.support.graphql import CREATE_AGENT
from tests.support.inprocess import Running, admin_token, eventually, running
from tests.support.processes import cli_ok
from tests.support.sdk_agent import SdkAgent
from tests.support.system import System

# What NousResearch hermes' Chronos verifier accepts: no EdDSA, hence RS256 by default.
HERMES_ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384"]


@pytest.fixture
def fire_algorithm() -> str:
    """CRONHOOKS_FIRE_JWT_ALGORITHM of the system under test; tests parametrize it."""
    return "RS256"


@pytest.fixture
def settings(settings: Settings, fire_algorithm: str) -> Settings:
    return dataclasses.replace(settings, fire_jwt_algorithm=fire_algorithm)


async def make_agent(
    r: Running | System, admin: str, settings: Settings, tmp: Path, instance: str, **kw: Any
) -> tuple[SdkAgent, str, int]:
    verifier = FireVerifier(
        jwks_url=f"{r.urls['admin-api']}/.well-known/jwks.json",
        audience=f"agent:{instance}",
        issuer=settings.public_url,
    )
    agent = await SdkAgent(
        verifier=verifier, store=SqliteClaimStore(tmp / f"{instance}.db"), **kw
    ).start()
    token, agent_id = await create_agent(r, admin, agent.url, instance)
    return agent, token, agent_id


def jwks_url(r: Running) -> str:
    return f"{r.urls['admin-api']}/.well-known/jwks.json"


async def jwks(r: Running) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(jwks_url(r)) as resp:
        assert resp.status == 200
        keys: list[dict[str, Any]] = (await resp.json())["keys"]
        return keys


def hermes_verify(token: str, url: str, instance_id: str, issuer: str) -> dict[str, Any]:
    """A fire JWT checked the way hermes' Chronos verifier does (blocking: run in a thread)."""
    signing_key = jwt.PyJWKClient(url).get_signing_key_from_jwt(token)
    claims: dict[str, Any] = jwt.decode(
        token,
        signing_key.key,
        algorithms=HERMES_ALGORITHMS,
        audience=f"agent:{instance_id}",
        issuer=issuer,
        leeway=30,
    )
    if claims.get("purpose") != "cron_fire":
        raise jwt.InvalidTokenError("not a cron_fire token")
    return claims


def fire_token(agent: SdkAgent, index: int = -1) -> str:
    headers = agent.requests[index]["headers"]
    assert isinstance(headers, dict)
    return str(headers["Authorization"]).split()[1]


async def armed_events(dsn: str) -> int:
    conn = await db.connect(dsn, name="t")
    try:
        count: int = await conn.fetchval(
            "select count(*) from eventstore.events where type = 'trigger.armed'"
        )
        return count
    finally:
        await conn.close()


async def timer_due(dsn: str, agent_id: int, job_id: str) -> datetime | None:
    conn = await db.connect(dsn, name="t")
    try:
        return await conn.fetchval(
            "select due_at from scheduler.timers where timer_key = $1",
            f"trigger:{agent_id}:{job_id}",
        )
    finally:
        await conn.close()


async def test_provision_then_fire_at_fire_at_with_a_verified_jwt(
    system: System, tmp_path: Path
) -> None:
    agent, token, agent_id = await make_agent(
        system, system.admin, system.settings, tmp_path, "inst-1"
    )
    fire_at = system.clock.now() + timedelta(seconds=30)
    status, body = await agent_cron(
        system,
        token,
        "POST",
        "provision",
        {
            "job_id": "digest",
            "fire_at": fire_at.isoformat(),
            "agent_callback_url": agent.url,
            "dedup_key": f"digest:{fire_at.isoformat()}",
        },
    )
    assert status == 200 and body["schedule_id"]
    assert await eventually(lambda: timer_due(system.dsn, agent_id, "digest")) == fire_at
    system.clock.set(fire_at - timedelta(seconds=1))
    await asyncio.sleep(0.3)
    assert agent.runs == []  # a second early: nothing
    system.clock.set(fire_at)
    [(job_id, fired_for)] = await agent.wait_runs(1)
    assert (
        job_id == "digest" and datetime.fromisoformat(fired_for.replace("Z", "+00:00")) == fire_at
    )
    request = agent.requests[-1]
    # fire_at comes back exactly as provisioned, in the body and in the JWT.
    assert json.loads(request["body"]) == {"job_id": "digest", "fire_at": fire_at.isoformat()}
    raw = request["headers"]["Authorization"].split()[1]
    header = jwt.get_unverified_header(raw)
    claims = jwt.decode(raw, options={"verify_signature": False})
    assert header["alg"] == "RS256" and header["kid"]  # the default
    assert claims["aud"] == "agent:inst-1" and claims["iss"] == system.settings.public_url
    assert claims["purpose"] == "cron_fire" and claims["job_id"] == "digest" and claims["jti"]
    assert claims["fire_at"] == fire_at.isoformat()
    assert claims["nbf"] <= claims["iat"] < claims["exp"] <= claims["iat"] + 120
    # The trigger is consumed.
    await eventually(lambda: _empty_list(system, token))
    _, triggers = await system.graphql(
        system.admin, f"{{ agentTriggers(agentId: {agent_id}) {{ jobId state lastOutcome }} }}"
    )
    assert triggers["data"]["agentTriggers"] == [
        {"jobId": "digest", "state": "fired", "lastOutcome": "delivered"}
    ]
    await agent.stop()


async def _empty_list(r: Running, token: str) -> bool:
    _, body = await agent_cron(r, token, "GET", "list")
    return body["jobs"] == []


async def test_duplicate_and_replacing_provisions_and_cancel(
    system: System, tmp_path: Path
) -> None:
    agent, token, agent_id = await make_agent(
        system, system.admin, system.settings, tmp_path, "inst-2"
    )
    t0 = system.clock.now()
    first = {
        "job_id": "j",
        "fire_at": (t0 + timedelta(seconds=10)).isoformat(),
        "agent_callback_url": agent.url,
    }
    ids = {
        (await agent_cron(system, token, "POST", "provision", first))[1]["schedule_id"]
        for _ in range(3)
    }
    assert len(ids) == 1  # the same call thrice arms one trigger
    moved = {**first, "fire_at": (t0 + timedelta(seconds=20)).isoformat()}
    assert (await agent_cron(system, token, "POST", "provision", moved))[1]["schedule_id"] in ids
    _, listing = await agent_cron(system, token, "GET", "list")
    assert (
        listing["jobs"]
        == listing["armed"]
        == [
            {
                "job_id": "j",
                "fire_at": moved["fire_at"],
                "schedule_id": next(iter(ids)),
                "agent_callback_url": agent.url,
            }
        ]
    )
    await eventually(lambda: _due_is(system.settings, agent_id, "j", t0 + timedelta(seconds=20)))
    system.clock.set(t0 + timedelta(seconds=15))  # the old time passes: nothing fires
    await asyncio.sleep(0.3)
    assert agent.runs == []
    system.clock.set(t0 + timedelta(seconds=20))
    await agent.wait_runs(1)
    # A job armed and cancelled never fires; cancelling twice or an unknown job is fine.
    other = {"job_id": "k", "fire_at": (t0 + timedelta(seconds=40)).isoformat()}
    await agent_cron(system, token, "POST", "provision", other)
    for job in ("k", "k", "never-armed"):
        assert await agent_cron(system, token, "POST", "cancel", {"job_id": job}) == (
            200,
            {"ok": True},
        )
    await eventually(lambda: _due_is(system.settings, agent_id, "k", None))
    system.clock.set(t0 + timedelta(seconds=60))
    await asyncio.sleep(0.3)
    assert len(agent.runs) == 1
    await agent.stop()


async def _due_is(settings: Settings, agent_id: int, job: str, due: datetime | None) -> bool:
    return await timer_due(settings.database_url, agent_id, job) == due


async def test_agents_cannot_see_or_touch_each_others_jobs(system: System, tmp_path: Path) -> None:
    a, token_a, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-a")
    b, token_b, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-b")
    when = (system.clock.now() + timedelta(seconds=5)).isoformat()
    await agent_cron(system, token_a, "POST", "provision", {"job_id": "shared", "fire_at": when})
    assert (await agent_cron(system, token_b, "GET", "list"))[1] == {"jobs": [], "armed": []}
    await agent_cron(system, token_b, "POST", "cancel", {"job_id": "shared"})
    assert len((await agent_cron(system, token_a, "GET", "list"))[1]["jobs"]) == 1
    system.clock.advance(timedelta(seconds=5))
    await a.wait_runs(1)
    await asyncio.sleep(0.3)
    assert b.runs == [] and b.requests == []
    assert (await agent_cron(system, "chg_not-a-token", "GET", "list"))[0] == 401
    await a.stop()
    await b.stop()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"fire_at": "2030-01-01T00:00:00+00:00"}, "job_id"),
        ({"job_id": "", "fire_at": "2030-01-01T00:00:00+00:00"}, "job_id"),
        ({"job_id": "x" * 201, "fire_at": "2030-01-01T00:00:00+00:00"}, "job_id"),
        ({"job_id": "a\nb", "fire_at": "2030-01-01T00:00:00+00:00"}, "job_id"),
        ({"job_id": "j", "fire_at": "2030-01-01T00:00:00"}, "fire_at"),
        ({"job_id": "j", "fire_at": "tomorrow"}, "fire_at"),
        ({"job_id": "j", "fire_at": 1234}, "fire_at"),
        ({"job_id": "j", "fire_at": "2030-01-01T00:00:00." + "0" * 60 + "Z"}, "fire_at"),
        (
            {"job_id": "j", "fire_at": "2030-01-01T00:00:00Z", "agent_callback_url": "ftp://x"},
            "agent_callback_url",
        ),
        ({"job_id": "j", "fire_at": "2030-01-01T00:00:00Z", "dedup_key": 5}, "dedup_key"),
    ],
)
async def test_malformed_provisions_name_the_field(
    system: System, tmp_path: Path, body, field
) -> None:  # type: ignore[no-untyped-def]
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-v")
    status, answer = await agent_cron(system, token, "POST", "provision", body)
    assert status == 400 and answer["field"] == field, answer
    assert (await agent_cron(system, token, "GET", "list"))[1] == {"jobs": [], "armed": []}
    await agent.stop()


async def test_a_past_fire_at_fires_at_once(system: System, tmp_path: Path) -> None:
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-p")
    await agent_cron(
        system,
        token,
        "POST",
        "provision",
        {"job_id": "late", "fire_at": (system.clock.now() - timedelta(minutes=5)).isoformat()},
    )
    await agent.wait_runs(1)
    await agent.stop()


async def test_a_503_then_202_agent_runs_the_job_once(system: System, tmp_path: Path) -> None:
    # Fire JWTs carry the platform clock's time and agents check them against theirs (30 s
    # leeway): start a minute back, so that after the 60 s Retry-After both agree again.
    system.clock.set(datetime.now(UTC) - timedelta(seconds=59))
    ready = asyncio.Event()
    agent, token, _ = await make_agent(
        system, system.admin, system.settings, tmp_path, "inst-w", ready=ready, ready_timeout=0.2
    )
    await agent_cron(
        system,
        token,
        "POST",
        "provision",
        {"job_id": "wake", "fire_at": system.clock.now().isoformat()},
    )
    await eventually(lambda: _statuses(agent, [503]))
    ready.set()  # the agent finished waking up
    system.clock.advance(timedelta(seconds=59))
    await asyncio.sleep(0.3)
    assert agent.statuses == [503]  # Retry-After: 60 is honoured
    system.clock.advance(timedelta(seconds=1))
    await agent.wait_runs(1)
    assert agent.statuses == [503, 202] and len(agent.runs) == 1
    await agent.stop()


async def _statuses(agent: SdkAgent, expected: list[int]) -> bool:
    return agent.statuses == expected


async def test_two_replicas_sharing_a_claim_store_run_once(system: System, tmp_path: Path) -> None:
    one, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-r")
    two = await SdkAgent(  # another process: a verifier of its own, the claim store shared
        verifier=FireVerifier(
            jwks_url=f"{system.urls['admin-api']}/.well-known/jwks.json",
            audience="agent:inst-r",
            issuer=system.settings.public_url,
        ),
        store=SqliteClaimStore(tmp_path / "inst-r.db"),
    ).start()
    await agent_cron(
        system,
        token,
        "POST",
        "provision",
        {"job_id": "once", "fire_at": system.clock.now().isoformat()},
    )
    await one.wait_runs(1)
    fire = one.requests[-1]
    # The same fire reaches both replicas again (a platform retry, a proxy replay).
    async with aiohttp.ClientSession() as session:

        async def replay(target: SdkAgent) -> int:
            async with session.post(
                f"{target.url}/api/cron/fire",
                data=fire["body"],
                headers={
                    "Authorization": fire["headers"]["Authorization"],
                    "Content-Type": "application/json",
                },
            ) as resp:
                return resp.status

        statuses = await asyncio.gather(replay(one), replay(two), replay(two))
    # A token seen before is refused (one saw it; two sees it twice, accepting it once); the
    # replica that accepts it finds the job claimed already and does not run it again.
    assert statuses[0] == 401 and sorted(statuses[1:]) == [202, 401]
    await asyncio.sleep(0.2)
    assert len(one.runs) + len(two.runs) == 1
    await one.stop()
    await two.stop()


async def test_forged_expired_wrong_purpose_or_audience_tokens_are_refused(
    system: System, tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    agent, _token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-j")
    async with system.services["admin-api"].commands.pool.acquire() as conn:  # type: ignore[attr-defined]
        key = await active_key(
            conn, SecretBox(system.settings.secret_key), algorithm="RS256", now=system.clock.now()
        )
    now = int(datetime.now(UTC).timestamp())
    good = {
        "iss": system.settings.public_url,
        "aud": "agent:inst-j",
        "purpose": "cron_fire",
        "job_id": "x",
        "fire_at": "t",
        "iat": now,
        "nbf": now,
        "exp": now + 60,
        "jti": "1",
    }
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cases = {
        "valid": key.sign(good),
        "forged": jwt.encode(good, stranger, algorithm="RS256", headers={"kid": key.kid}),
        "expired": key.sign({**good, "iat": now - 300, "nbf": now - 300, "exp": now - 100}),
        "not yet valid": key.sign({**good, "nbf": now + 300}),
        "wrong purpose": key.sign({**good, "purpose": "api"}),
        "no purpose": key.sign({k: v for k, v in good.items() if k != "purpose"}),
        "wrong audience": key.sign({**good, "aud": "agent:someone-else"}),
        "wrong issuer": key.sign({**good, "iss": "http://evil.example"}),
        "another fire_at": key.sign({**good, "fire_at": "u"}),
        "no fire_at": key.sign({k: v for k, v in good.items() if k != "fire_at"}),
        "unknown kid": jwt.encode(good, stranger, algorithm="RS256", headers={"kid": "nope"}),
        "alg none": jwt.encode(good, None, algorithm="none", headers={"kid": key.kid}),
    }
    async with aiohttp.ClientSession() as session:
        results = {}
        for name, tok in cases.items():
            async with session.post(
                f"{agent.url}/api/cron/fire",
                json={"job_id": "x", "fire_at": "t"},
                headers={"Authorization": f"Bearer {tok}"},
            ) as resp:
                results[name] = resp.status
        async with session.post(
            f"{agent.url}/api/cron/fire",
            json={"fire_at": "t"},
            headers={"Authorization": f"Bearer {cases['valid']}"},
        ) as resp:
            results["no job_id"] = resp.status
        async with session.post(f"{agent.url}/api/cron/fire", json={"job_id": "x"}) as resp:
            results["no token"] = resp.status
    assert results == {
        "valid": 202,
        "forged": 401,
        "expired": 401,
        "not yet valid": 401,
        "wrong purpose": 401,
        "no purpose": 401,
        "wrong audience": 401,
        "wrong issuer": 401,
        "another fire_at": 401,
        "no fire_at": 401,
        "unknown kid": 401,
        "alg none": 401,
        "no job_id": 400,
        "no token": 401,
    }
    await agent.stop()


async def test_reconcile_arms_rearms_and_cancels(system: System, tmp_path: Path) -> None:
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "inst-c")
    client = CronClient(system.urls["admin-api"], token)
    t = system.clock.now() + timedelta(hours=1)
    diff = await client.reconcile({"a": t, "b": t}, agent.url)
    assert (sorted(diff.armed), diff.rearmed, diff.cancelled) == (["a", "b"], [], [])
    diff = await client.reconcile({"a": t, "b": t + timedelta(minutes=5), "c": t}, agent.url)
    assert (diff.unchanged, diff.rearmed, diff.armed, diff.cancelled) == (["a"], ["b"], ["c"], [])
    diff = await client.reconcile({"c": t}, agent.url)
    assert (sorted(diff.cancelled), diff.unchanged) == (["a", "b"], ["c"])
    assert [j["job_id"] for j in await client.list()] == ["c"]
    await agent.stop()


async def fire_now(r: Running, token: str, agent: SdkAgent, clock: ManualClock, job_id: str) -> str:
    """Provision `job_id` due now, wait for its fire and return the fire's JWT."""
    before = len(agent.runs)
    status, _ = await agent_cron(
        r, token, "POST", "provision", {"job_id": job_id, "fire_at": clock.now().isoformat()}
    )
    assert status == 200
    await agent.wait_runs(before + 1)
    return fire_token(agent)


def check_jwks_entries(keys: list[dict[str, Any]]) -> None:
    for key in keys:
        assert key["kid"] and key["use"] == "sig", key
        assert key["alg"] in ("RS256", "ES256", "EdDSA"), key
        assert {"RS256": "RSA", "ES256": "EC", "EdDSA": "OKP"}[key["alg"]] == key["kty"]
        assert "d" not in key and "p" not in key  # public halves only


@pytest.mark.parametrize("fire_algorithm", ["RS256", "ES256", "EdDSA"])
async def test_admin_api_publishes_a_key_of_the_configured_algorithm_from_the_start(
    settings: Settings, fire_algorithm: str
) -> None:
    async with running(settings, ManualClock(datetime.now(UTC)), ("admin-api",)) as r:
        [key] = await jwks(r)  # before any fire: never {"keys": []}
    check_jwks_entries([key])
    assert key["alg"] == fire_algorithm
    if fire_algorithm == "RS256":
        n = int.from_bytes(jwt.utils.base64url_decode(key["n"]), "big")
        assert n.bit_length() == 2048
    if fire_algorithm == "ES256":
        assert key["crv"] == "P-256"
    if fire_algorithm == "EdDSA":
        assert key["crv"] == "Ed25519"


@pytest.mark.parametrize("fire_algorithm", ["RS256", "ES256"])
async def test_a_fire_verifies_like_hermes_chronos(
    system: System, tmp_path: Path, fire_algorithm: str
) -> None:
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "chronos-1")
    raw = await fire_now(system, token, agent, system.clock, "nightly")
    assert jwt.get_unverified_header(raw)["alg"] == fire_algorithm
    claims = await asyncio.to_thread(
        hermes_verify, raw, jwks_url(system), "chronos-1", system.settings.public_url
    )
    assert claims["job_id"] == "nightly" and claims["exp"] - claims["iat"] <= 120
    assert claims["fire_at"] == json.loads(agent.requests[-1]["body"])["fire_at"]  # type: ignore[arg-type]
    check_jwks_entries(await jwks(system))
    await agent.stop()


@pytest.mark.parametrize("fire_algorithm", ["EdDSA"])
async def test_eddsa_fires_verify_with_the_sdk_when_configured(
    system: System, tmp_path: Path
) -> None:
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "ed-1")
    raw = await fire_now(
        system, token, agent, system.clock, "j"
    )  # the SDK agent verified and ran it
    assert jwt.get_unverified_header(raw)["alg"] == "EdDSA"
    assert agent.statuses == [202]
    check_jwks_entries(await jwks(system))
    # Why EdDSA is not the default: hermes' verifier does not accept it.
    with pytest.raises(jwt.InvalidAlgorithmError):
        await asyncio.to_thread(
            hermes_verify, raw, jwks_url(system), "ed-1", system.settings.public_url
        )
    await agent.stop()


@pytest.mark.parametrize("fire_algorithm", ["ES256"])
async def test_a_key_of_another_algorithm_is_replaced_once_and_stays_published(
    settings: Settings,
) -> None:
    """A restart with another CRONHOOKS_FIRE_JWT_ALGORITHM: every process wants a new key
    at once; they agree on one, and the old key still verifies the tokens it signed."""
    box = SecretBox(settings.secret_key)
    now = datetime.now(UTC)
    conns = [await db.connect(settings.database_url, name=f"k{i}") for i in range(8)]
    try:
        old = await active_key(conns[0], box, algorithm="EdDSA", now=now)
        keys = await asyncio.gather(
            *(active_key(c, box, algorithm="ES256", now=now) for c in conns)
        )
        assert {k.kid for k in keys} != {old.kid} and len({k.kid for k in keys}) == 1
        assert {k.algorithm for k in keys} == {"ES256"}
        rows = await conns[0].fetch(
            "select kid, algorithm, retired_at from shared.signing_keys order by created_at"
        )
        assert [(r["kid"], r["retired_at"] is None) for r in rows] == [
            (old.kid, False),
            (keys[0].kid, True),
        ]
        published = await published_jwks(conns[0], now=now)
        assert {k["kid"]: k["alg"] for k in published["keys"]} == {
            old.kid: "EdDSA",
            keys[0].kid: "ES256",
        }
    finally:
        for c in conns:
            await c.close()


@pytest.mark.parametrize("fire_algorithm", ["RS256", "ES256", "EdDSA"])
async def test_keys_rotate_keeps_the_retired_key_and_new_fires_use_the_new_kid(
    settings: Settings, tmp_path: Path, fire_algorithm: str
) -> None:
    # The fire JWTs carry the platform clock's time and agents check them against the real
    # one (30 s leeway): start 20 s back, so that after the key cache's 30 s both agree.
    from cronhooks_dispatcher.fire import KEY_REFRESH

    clock = ManualClock(datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=20))
    async with running(settings, clock) as r:
        admin = await admin_token(settings.database_url)
        # One agent is fired before the rotation, the other after it. (PyJWKClient refetches
        # a JWKS for an unknown kid only 30 s after its last fetch: an agent that has just
        # fetched refuses the new kid at first, and the platform's retry gets through.)
        early, early_token, _ = await make_agent(r, admin, settings, tmp_path, "rot-early")
        late, late_token, _ = await make_agent(r, admin, settings, tmp_path, "rot-late")
        before = await fire_now(r, early_token, early, clock, "before")
        old_kid = jwt.get_unverified_header(before)["kid"]

        out = await cli_ok(settings, "keys", "rotate")
        assert f"retired key {old_kid}; signing now with" in out and fire_algorithm in out
        keys = {k["kid"]: k for k in await jwks(r)}
        [new_kid] = keys.keys() - {old_kid}
        assert keys[new_kid]["alg"] == keys[old_kid]["alg"] == fire_algorithm
        check_jwks_entries(list(keys.values()))
        # A token the retired key signed still verifies (fresh verifier: a fresh JWKS fetch).
        fresh = FireVerifier(
            jwks_url=jwks_url(r), audience="agent:rot-early", issuer=settings.public_url
        )
        assert (await fresh.verify(before))["job_id"] == "before"

        clock.advance(KEY_REFRESH + timedelta(seconds=1))  # the dispatcher re-reads its key
        after = await fire_now(r, late_token, late, clock, "after")
        assert jwt.get_unverified_header(after)["kid"] == new_kid
        assert late.statuses == [202]  # verified with the new key from the JWKS
        assert (await fresh.verify(before))["job_id"] == "before"
        await early.stop()
        await late.stop()


async def test_rotate_keeps_the_retired_key_until_its_tokens_expire(system: System) -> None:
    from cronhooks_common.keys import PUBLISH_RETIRED_FOR, rotate

    box = SecretBox(system.settings.secret_key)
    conn = await db.connect(system.dsn, name="keys")
    try:
        old = await active_key(conn, box, algorithm="RS256", now=system.clock.now())
        retired, new_kid = await rotate(conn, box, algorithm="ES256", now=system.clock.now())
        assert retired == old.kid and new_kid != old.kid
        assert (
            await active_key(conn, box, algorithm="ES256", now=system.clock.now())
        ).kid == new_kid
        now_published = await published_jwks(conn, now=system.clock.now())
        assert {k["kid"] for k in now_published["keys"]} == {old.kid, new_kid}
        # Once every token it signed has expired (plus leeway), the old key is unpublished.
        later = await published_jwks(
            conn, now=system.clock.now() + PUBLISH_RETIRED_FOR + timedelta(seconds=1)
        )
        assert {k["kid"] for k in later["keys"]} == {new_kid}
        assert timedelta(seconds=150) < PUBLISH_RETIRED_FOR
    finally:
        await conn.close()


async def test_hermes_style_reconcile_finds_nothing_to_rearm(
    system: System, tmp_path: Path
) -> None:
    """Seed 001: a hermes agent provisions, later lists, reads `armed` and compares each
    fire_at string with its own; equal strings mean nothing to re-arm."""
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "hermes")
    base = system.clock.now().replace(microsecond=0) + timedelta(hours=1)
    wanted = {
        "offset": base.isoformat(),  # ...+00:00
        "zulu": base.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "millis": base.strftime("%Y-%m-%dT%H:%M:%S.250Z"),
        "micros": (base + timedelta(microseconds=123456)).isoformat(),
        "berlin": base.astimezone(ZoneInfo("Europe/Berlin")).isoformat(),
    }
    for job_id, fire_at in wanted.items():
        body = {"job_id": job_id, "fire_at": fire_at, "agent_callback_url": agent.url}
        assert (await agent_cron(system, token, "POST", "provision", body))[0] == 200
    armed_before = await armed_events(system.dsn)
    assert armed_before == len(wanted)

    _, listing = await agent_cron(system, token, "GET", "list")
    listed = {job["job_id"]: job["fire_at"] for job in listing["armed"]}
    assert listed == wanted  # byte for byte
    assert listing["armed"] == listing["jobs"]
    to_rearm = [job_id for job_id, fire_at in wanted.items() if listed.get(job_id) != fire_at]
    assert to_rearm == []

    # Provisioning the same again arms nothing new.
    for job_id, fire_at in wanted.items():
        body = {"job_id": job_id, "fire_at": fire_at, "agent_callback_url": agent.url}
        assert (await agent_cron(system, token, "POST", "provision", body))[0] == 200
    assert await armed_events(system.dsn) == armed_before
    # The same instant spelled another way re-arms in place: still one trigger for the job,
    # and the list (and the callback, by the new trigger.armed) echo the new spelling.
    respelled = {"job_id": "zulu", "fire_at": base.isoformat(), "agent_callback_url": agent.url}
    assert (await agent_cron(system, token, "POST", "provision", respelled))[0] == 200
    assert await armed_events(system.dsn) == armed_before + 1
    _, listing = await agent_cron(system, token, "GET", "list")
    assert [j["fire_at"] for j in listing["armed"] if j["job_id"] == "zulu"] == [base.isoformat()]

    async def zulu_timers() -> list[str] | None:
        conn = await db.connect(system.dsn, name="test")
        try:
            rows = await conn.fetch(
                "select payload->>'fire_at_text' as spelled from scheduler.timers"
                " where timer_key like 'trigger:%:zulu'"
            )
        finally:
            await conn.close()
        spelled = [row["spelled"] for row in rows]
        return spelled if spelled == [base.isoformat()] else None

    assert await eventually(zulu_timers) == [base.isoformat()]
    await agent.stop()


async def test_the_fire_echoes_fire_at_as_provisioned(system: System, tmp_path: Path) -> None:
    agent, token, _ = await make_agent(system, system.admin, system.settings, tmp_path, "echo")
    spelled = system.clock.now().strftime("%Y-%m-%dT%H:%M:%S.0Z")  # not how the platform writes it
    await agent_cron(system, token, "POST", "provision", {"job_id": "e", "fire_at": spelled})
    [(job_id, fired_for)] = await agent.wait_runs(1)
    assert (job_id, fired_for) == ("e", spelled)
    assert json.loads(agent.requests[-1]["body"]) == {"job_id": "e", "fire_at": spelled}  # type: ignore[arg-type]
    claims = jwt.decode(fire_token(agent), options={"verify_signature": False})
    assert claims["fire_at"] == spelled
    await agent.stop()


ROTATE_TOKEN = "mutation($id: Int!) { rotateAgentToken(id: $id) { accessToken } }"
DELETE_AGENT = "mutation($id: Int!) { deleteAgent(id: $id) { id } }"


async def test_revoked_tokens_are_invalid_client_and_unknown_ones_401(
    system: System, tmp_path: Path
) -> None:
    agent, first, agent_id = await make_agent(
        system, system.admin, system.settings, tmp_path, "rotating"
    )
    _, body = await system.graphql(system.admin, ROTATE_TOKEN, {"id": agent_id})
    second = body["data"]["rotateAgentToken"]["accessToken"]
    _, body = await system.graphql(system.admin, ROTATE_TOKEN, {"id": agent_id})
    third = body["data"]["rotateAgentToken"]["accessToken"]
    gone, gone_token, gone_id = await make_agent(
        system, system.admin, system.settings, tmp_path, "deleted"
    )
    _, body = await system.graphql(system.admin, DELETE_AGENT, {"id": gone_id})
    assert body["data"]["deleteAgent"]["id"] == gone_id

    async def status_of(token: str | None) -> tuple[int, Any]:
        return await agent_cron(system, token, "GET", "list")

    assert await status_of(third) == (200, {"jobs": [], "armed": []})
    for revoked in (first, second, gone_token):
        assert await status_of(revoked) == (403, {"error": "invalid_client"})
    for unknown in ("chg_never-issued", "garbage", None):
        status, answer = await status_of(unknown)
        assert status == 401 and answer["error"] != "invalid_client"
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{system.urls['admin-api']}/api/agent-cron/list",
            headers={"Authorization": f"Basic {third}"},
        ) as resp,
    ):
        assert resp.status == 401  # not a Bearer token
    # A revoked token is refused for writes as well, and arms nothing.
    provision = {"job_id": "j", "fire_at": "2030-01-01T00:00:00Z"}
    assert (await agent_cron(system, first, "POST", "provision", provision))[0] == 403
    assert await armed_events(system.dsn) == 0
    await agent.stop()
    await gone.stop()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"instanceId": "a", "callbackUrl": "ftp://agent.example"}, "callbackUrl"),
        ({"instanceId": "a", "callbackUrl": "not a url"}, "callbackUrl"),
        ({"instanceId": "a", "callbackUrl": ""}, "callbackUrl"),
        ({"instanceId": "a", "callbackUrl": "http://user:pw@agent.example/"}, "callbackUrl"),
        ({"instanceId": "a b", "callbackUrl": "http://agent.example/"}, "instanceId"),
        (
            {"instanceId": "a", "callbackUrl": "http://agent.example/", "description": "\x00"},
            "description",
        ),
    ],
)
async def test_create_agent_input_errors_name_the_graphql_field(
    system: System, fields: dict[str, str], field: str
) -> None:
    _, body = await system.graphql(system.admin, CREATE_AGENT, {"input": fields})
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert error["extensions"]["field"] == field, error
    _, listed = await system.graphql(system.admin, "{ agents { id } }")
    assert listed["data"]["agents"] == []


async def test_a_burst_of_fires_reads_and_opens_the_signing_key_once(settings: Settings) -> None:
    """Opening an RSA key costs as much as ~200 signatures: a signer opens each key once,
    and fires arriving together with no key (or a stale one) wait for one reader."""
    box = SecretBox(settings.secret_key)
    clock = ManualClock(datetime.now(UTC))
    pool = await db.create_pool(settings.database_url, name="fire-keys")
    try:
        async with pool.acquire() as conn:
            first = await active_key(conn, box, algorithm="RS256", now=clock.now())
            again = await active_key(conn, box, algorithm="RS256", now=clock.now())
        assert again.kid == first.kid and again.private_key is first.private_key

        caller = FireCaller(
            pool=pool,
            http=None,  # type: ignore[arg-type]  # only the key is asked for
            box=box,
            clock=clock,
            algorithm="RS256",
            writer=None,  # type: ignore[arg-type]
            issuer=settings.public_url,
            allow_private=True,
        )
        burst = await asyncio.gather(*(caller.signing_key(clock.now()) for _ in range(50)))
        assert len({id(key) for key in burst}) == 1  # one read served all fifty
        assert burst[0].kid == first.kid
        clock.advance(timedelta(minutes=5))  # stale now: read once more, same key
        later = await asyncio.gather(*(caller.signing_key(clock.now()) for _ in range(50)))
        assert len({id(key) for key in later}) == 1 and later[0] is not burst[0]
        assert later[0].private_key is first.private_key
    finally:
        await pool.close()
