"""The SDK's helpers: webhook signature verification (both schemes), the answer, and the
fire JWT checks of FireVerifier and fire_handler (against a JWKS served on loopback)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from cronhooks_agent import (
    FireAuthError,
    FireVerifier,
    SignatureError,
    SqliteClaimStore,
    SyncAnswer,
    fire_handler,
    verify_webhook,
)
from cronhooks_agent.answers import content_hash
from cronhooks_agent.fire import LEEWAY_SECONDS
from cronhooks_common.keys import public_jwk
from cronhooks_common.signing import SecretKeys, generate_secret, signature_headers

BODY = b'{"version":1,"id":42}'


def signed(secret: str, stamp: int | None = None, body: bytes = BODY) -> dict[str, str]:
    return signature_headers(
        SecretKeys.of(secret),
        delivery_id="42",
        timestamp=stamp or int(time.time()),
        body=body,
        attempt=1,
    )


@pytest.mark.parametrize(
    "secret",
    [pytest.param(generate_secret(), id="generated"), "a plain secret of 24+ characters"],
)
def test_both_header_schemes_verify(secret: str) -> None:
    headers = signed(secret)
    verify_webhook(secret, headers, BODY)
    verify_webhook(secret, {k: v for k, v in headers.items() if k.startswith("webhook-")}, BODY)
    trip2g_only = {k: v for k, v in headers.items() if k.startswith("X-")}
    verify_webhook(secret, trip2g_only, BODY, accept_unstamped=True)
    # The trip2g header does not cover the timestamp: alone, it is refused by default, so
    # stripping the Standard Webhooks headers cannot sneak a replayed request through.
    with pytest.raises(SignatureError, match="accept_unstamped"):
        verify_webhook(secret, trip2g_only, BODY)
    with pytest.raises(SignatureError, match="does not match"):
        verify_webhook(secret, trip2g_only, BODY + b" ", accept_unstamped=True)


def test_tampering_wrong_secret_and_old_requests_fail() -> None:
    secret = generate_secret()
    with pytest.raises(SignatureError):
        verify_webhook(secret, signed(secret), BODY + b" ")
    with pytest.raises(SignatureError):
        verify_webhook(generate_secret(), signed(secret), BODY)
    with pytest.raises(SignatureError, match="tolerance"):
        verify_webhook(secret, signed(secret, int(time.time()) - 3600), BODY)
    with pytest.raises(SignatureError, match="no signature"):
        verify_webhook(secret, {}, BODY)


def test_rotation_style_multiple_signatures() -> None:
    old, new = generate_secret(), generate_secret()
    headers = signed(new)
    headers["webhook-signature"] = (
        signed(old)["webhook-signature"] + " " + headers["webhook-signature"]
    )
    verify_webhook(new, {k: v for k, v in headers.items() if k.startswith("webhook-")}, BODY)


def test_sync_answer_builder() -> None:
    answer = (
        SyncAnswer(message="two notes")
        .create("digests/a.md", "A")
        .update("digests/b.md", "B2", previous_content="B")
    )
    assert answer.to_json() == {
        "status": "ok",
        "message": "two notes",
        "changes": [
            {"path": "digests/a.md", "content": "A", "expected_hash": ""},
            {"path": "digests/b.md", "content": "B2", "expected_hash": content_hash("B")},
        ],
    }
    assert SyncAnswer(status="error", message="no data").to_json() == {
        "status": "error",
        "message": "no data",
    }


def test_sync_answer_reports_costs_and_logs_that_the_dispatcher_keeps() -> None:
    """CONTRACT §16.1: the SDK's costs and logs pass the dispatcher's rules unchanged."""
    from datetime import UTC, datetime

    from cronhooks_common.agent_report import of_answer

    at = datetime(2026, 2, 9, 9, 0, 3, tzinfo=UTC)
    answer = (
        SyncAnswer(message="digest written")
        .cost("tokens", 5000)
        .cost("usd", 0.004)
        .cost("tokens", 186)
        .log("info", "read 12 notes", data={"notes": 12}, ts=at)
        .log("warn", "model retried once")
    )
    body = answer.to_json()
    assert body == {
        "status": "ok",
        "message": "digest written",
        "costs": {"tokens": 5186, "usd": 0.004},
        "logs": [
            {
                "level": "info",
                "msg": "read 12 notes",
                "ts": "2026-02-09T09:00:03+00:00",
                "data": {"notes": 12},
            },
            {"level": "warn", "msg": "model retried once"},
        ],
    }
    report = of_answer(dict(body))
    assert [(c.unit, c.amount) for c in report.costs] == [("tokens", 5186), ("usd", 0.004)]
    assert [(e.level, e.msg, e.ts) for e in report.logs] == [
        ("info", "read 12 notes", "2026-02-09T09:00:03+00:00"),
        ("warn", "model retried once", None),
    ]


def test_the_readme_agent_is_valid_python_using_the_sdk() -> None:
    import re
    from pathlib import Path

    import cronhooks_agent

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    [code] = re.findall(r"## An agent in 20 lines.*?```python\n(.*?)```", readme, re.S)
    compile(code, "README agent", "exec")
    assert len([line for line in code.splitlines() if line.strip()]) <= 20
    for name in re.findall(r"from cronhooks_agent import (.+)", code)[0].split(", "):
        assert hasattr(cronhooks_agent, name.strip())


async def test_the_demo_agent_answers_with_a_digest_note_and_checks_signatures() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from cronhooks_agent.demo import make_app

    secret = generate_secret()
    async with TestClient(TestServer(make_app(secret), host="127.0.0.1")) as client:
        resp = await client.post("/webhook", data=BODY, headers=signed(secret))
        answer = await resp.json()
        assert resp.status == 200
        assert answer["changes"][0]["path"] == "demo/digest-42.md"
        assert answer["changes"][0]["expected_hash"] == ""
        resp = await client.post("/webhook", data=BODY, headers=signed(generate_secret()))
        assert resp.status == 401
        deep = b"[" * 30_000 + b"]" * 30_000
        resp = await client.post("/webhook", data=deep, headers=signed(secret, body=deep))
        assert resp.status == 400
        assert (await resp.json())["message"] == "request body nested deeper than 64 levels"


async def test_the_demo_agent_keeps_what_it_received_across_restarts(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from cronhooks_agent.demo import make_app

    secret, store = generate_secret(), tmp_path / "received.json"
    async with TestClient(TestServer(make_app(secret, store), host="127.0.0.1")) as client:
        assert (await client.post("/webhook", data=BODY, headers=signed(secret))).status == 200
    # A new process on the same file (what the next `make up` starts) shows it.
    async with TestClient(TestServer(make_app(secret, store), host="127.0.0.1")) as client:
        resp = await client.get("/received")
        shown = await resp.json()
        assert resp.status == 200
        assert [r["body"]["id"] for r in shown] == [42]
    store.write_text('[{"cut sho')  # a damaged file: the agent starts empty, not broken
    async with TestClient(TestServer(make_app(secret, store), host="127.0.0.1")) as client:
        assert await (await client.get("/received")).json() == []


# --- fire JWTs (FireVerifier, fire_handler) ----------------------------------------------

PRIVATE_KEYS: dict[str, Callable[[], Any]] = {
    "RS256": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "RS384": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "RS512": lambda: rsa.generate_private_key(public_exponent=65537, key_size=3072),
    "ES256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "ES384": lambda: ec.generate_private_key(ec.SECP384R1()),
    "EdDSA": ed25519.Ed25519PrivateKey.generate,
}
ISSUER = "https://cronhooks.example"


def fire_claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": "agent:unit",
        "purpose": "cron_fire",
        "job_id": "j",
        "fire_at": "2026-06-18T12:34:56+00:00",
        "iat": now,
        "nbf": now,
        "exp": now + 60,
        "jti": uuid.uuid4().hex,  # as the platform does: a fresh one per token
    }
    return {**claims, **overrides}


@asynccontextmanager
async def jwks_at(keys: list[dict[str, Any]]) -> AsyncIterator[FireVerifier]:
    """A FireVerifier whose platform publishes `keys` on a loopback JWKS endpoint."""

    async def serve(_: web.Request) -> web.Response:
        return web.json_response({"keys": keys})

    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", serve)
    async with TestServer(app, host="127.0.0.1") as server:
        yield FireVerifier(
            jwks_url=str(server.make_url("/.well-known/jwks.json")),
            audience="agent:unit",
            issuer=ISSUER,
        )


@pytest.mark.parametrize("algorithm", sorted(PRIVATE_KEYS))
async def test_the_fire_verifier_accepts_each_asymmetric_algorithm(algorithm: str) -> None:
    private = PRIVATE_KEYS[algorithm]()
    jwk = public_jwk(private, kid="k1", algorithm=algorithm)
    token = jwt.encode(fire_claims(), private, algorithm=algorithm, headers={"kid": "k1"})
    async with jwks_at([jwk]) as verifier:
        assert (await verifier.verify(token))["job_id"] == "j"


async def test_the_fire_verifier_refuses_symmetric_and_unsigned_tokens() -> None:
    secret = b"a shared secret of at least 32 bytes!"
    oct_jwk = {"kty": "oct", "kid": "hs", "alg": "HS256", "use": "sig", "k": b64(secret)}
    private = PRIVATE_KEYS["RS256"]()
    rsa_jwk = public_jwk(private, kid="rs", algorithm="RS256")
    async with jwks_at([oct_jwk, rsa_jwk]) as verifier:
        for token in (
            jwt.encode(fire_claims(), secret, algorithm="HS256", headers={"kid": "hs"}),
            jwt.encode(fire_claims(), None, algorithm="none", headers={"kid": "rs"}),
        ):
            with pytest.raises(FireAuthError):
                await verifier.verify(token)
        ok = jwt.encode(fire_claims(), private, algorithm="RS256", headers={"kid": "rs"})
        assert (await verifier.verify(ok))["purpose"] == "cron_fire"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def test_the_fire_handler_wants_the_token_for_the_bodys_fire_at(tmp_path: Path) -> None:
    private = PRIVATE_KEYS["ES256"]()
    ran: list[tuple[str, str]] = []

    async def run(job_id: str, fire_at: str) -> None:
        ran.append((job_id, fire_at))

    async with jwks_at([public_jwk(private, kid="k", algorithm="ES256")]) as verifier:
        app = web.Application()
        store = SqliteClaimStore(tmp_path / "claims.db")
        app.router.add_post("/api/cron/fire", fire_handler(verifier=verifier, store=store, run=run))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:

            async def fire(claims: dict[str, Any], body: dict[str, str]) -> int:
                token = jwt.encode(claims, private, algorithm="ES256", headers={"kid": "k"})
                resp = await client.post(
                    "/api/cron/fire", json=body, headers={"Authorization": f"Bearer {token}"}
                )
                return resp.status

            at = fire_claims()["fire_at"]
            assert (
                await fire(fire_claims(), {"job_id": "j", "fire_at": "2027-01-01T00:00:00Z"}) == 401
            )
            assert await fire(fire_claims(fire_at=None), {"job_id": "j", "fire_at": at}) == 401
            assert await fire(fire_claims(), {"job_id": "j", "fire_at": at}) == 202
    await asyncio.sleep(0)  # the job runs in the background
    assert ran == [("j", at)]


# --- each fire token is accepted once (CONTRACT §15 "Replays") ---------------------------


@asynccontextmanager
async def fire_endpoints(
    tmp_path: Path, replicas: int = 1
) -> AsyncIterator[tuple[Callable[..., Any], list[TestClient], list[tuple[str, str]]]]:
    """`replicas` agents, each with its own FireVerifier, sharing one claim store; yields
    a token maker, their clients and the runs."""
    private = PRIVATE_KEYS["ES256"]()
    ran: list[tuple[str, str]] = []

    async def run(job_id: str, fire_at: str) -> None:
        ran.append((job_id, fire_at))

    def token(**claims: Any) -> str:
        return jwt.encode(fire_claims(**claims), private, algorithm="ES256", headers={"kid": "k"})

    store = SqliteClaimStore(tmp_path / "claims.db")
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for _ in range(replicas):
            verifier = await stack.enter_async_context(
                jwks_at([public_jwk(private, kid="k", algorithm="ES256")])
            )
            app = web.Application()
            handler = fire_handler(verifier=verifier, store=store, run=run)
            app.router.add_post("/api/cron/fire", handler)
            clients.append(
                await stack.enter_async_context(TestClient(TestServer(app, host="127.0.0.1")))
            )
        yield token, clients, ran


async def present(client: TestClient, token: str, fire_at: str | None = None) -> tuple[int, Any]:
    body = {"job_id": "j", "fire_at": fire_at or fire_claims()["fire_at"]}
    resp = await client.post(
        "/api/cron/fire", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    return resp.status, await resp.json()


async def test_a_token_presented_again_is_refused_a_fresh_one_is_not(tmp_path: Path) -> None:
    async with fire_endpoints(tmp_path) as (token, [client], ran):
        first = token()
        assert (await present(client, first))[0] == 202
        status, answer = await present(client, first)
        assert status == 401 and "presented before" in answer["error"]
        # The platform's retry of the same fire is a fresh JWT: accepted, and the claim
        # store keeps the job from running twice.
        assert (await present(client, token()))[0] == 202
        # Two copies arriving together: exactly one gets through.
        twin = token()
        both = await asyncio.gather(present(client, twin), present(client, twin))
        statuses = sorted(status for status, _ in both)
        assert statuses == [202, 401]
    await asyncio.sleep(0)  # the job runs in the background
    assert ran == [("j", fire_claims()["fire_at"])]


async def test_a_token_refused_for_its_body_is_not_used_up(tmp_path: Path) -> None:
    async with fire_endpoints(tmp_path) as (token, [client], _):
        once = token()
        assert (await present(client, once, fire_at="2027-01-01T00:00:00Z"))[0] == 401
        assert (await present(client, once))[0] == 202
        assert (await present(client, once))[0] == 401


async def test_a_body_nested_past_64_levels_is_a_named_400_not_a_500(tmp_path: Path) -> None:
    """Only after the token verified: the body is then parsed by the one bounded parser."""
    async with fire_endpoints(tmp_path) as (token, [client], ran):
        once = token()
        for levels in (65, 30_000):
            resp = await client.post(
                "/api/cron/fire",
                data=b"[" * levels + b"]" * levels,
                headers={"Authorization": f"Bearer {once}"},
            )
            assert resp.status == 400
            assert await resp.json() == {"error": "request body nested deeper than 64 levels"}
        assert (await present(client, once))[0] == 202  # the token was not used up
    await asyncio.sleep(0)
    assert len(ran) == 1


async def test_replicas_each_accept_the_token_once_and_run_the_job_once(
    tmp_path: Path,
) -> None:
    async with fire_endpoints(tmp_path, replicas=2) as (token, [one, two], ran):
        fire = token()
        assert (await present(one, fire))[0] == 202
        assert (await present(two, fire))[0] == 202  # its own record: never seen there
        assert (await present(one, fire))[0] == 401
        assert (await present(two, fire))[0] == 401
    await asyncio.sleep(0)
    assert len(ran) == 1


def offline_verifier(**kw: Any) -> FireVerifier:
    # accept_once needs no JWKS: PyJWKClient fetches nothing until a token is verified.
    return FireVerifier(
        jwks_url="http://127.0.0.1:9/jwks.json", audience="agent:unit", issuer=ISSUER, **kw
    )


def test_accepted_jtis_are_forgotten_once_their_token_has_expired() -> None:
    verifier = offline_verifier()
    now = time.time()
    verifier.accept_once({"jti": "old", "exp": now - LEEWAY_SECONDS - 1})
    verifier.accept_once({"jti": "new", "exp": now + 60})
    assert verifier.remembered == 1  # "old" could not be verified any more: forgotten
    with pytest.raises(FireAuthError, match="presented before"):
        verifier.accept_once({"jti": "new", "exp": now + 60})
    # Within the leeway a token still verifies, so its jti is still remembered.
    verifier.accept_once({"jti": "late", "exp": now - LEEWAY_SECONDS + 30})
    with pytest.raises(FireAuthError, match="presented before"):
        verifier.accept_once({"jti": "late", "exp": now - LEEWAY_SECONDS + 30})


def test_the_record_is_bounded_dropping_the_soonest_to_expire() -> None:
    verifier = offline_verifier(max_remembered=3)
    now = time.time()
    for index, jti in enumerate("abcd"):
        verifier.accept_once({"jti": jti, "exp": now + 60 + index})
    assert verifier.remembered == 3
    for jti in "bcd":
        with pytest.raises(FireAuthError):
            verifier.accept_once({"jti": jti, "exp": now + 60})
    verifier.accept_once({"jti": "a", "exp": now + 60})  # dropped to make room for "d"


@pytest.mark.parametrize(
    "claims", [{"exp": 2_000_000_000}, {"jti": "", "exp": 2_000_000_000}, {"jti": "x"}]
)
def test_accept_once_wants_a_jti_and_an_exp(claims: dict[str, Any]) -> None:
    with pytest.raises(FireAuthError):
        offline_verifier().accept_once(claims)


async def test_a_token_without_jti_does_not_verify() -> None:
    private = PRIVATE_KEYS["ES256"]()
    claims = {k: v for k, v in fire_claims().items() if k != "jti"}
    token = jwt.encode(claims, private, algorithm="ES256", headers={"kid": "k"})
    async with jwks_at([public_jwk(private, kid="k", algorithm="ES256")]) as verifier:
        with pytest.raises(FireAuthError, match="jti"):
            await verifier.verify(token)
