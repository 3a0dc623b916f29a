"""Every row of CONTRACT §3/§4: the request, each kind of answer, retries, the attempt log,
410 and auto-disable, FORBID — on the running services with a real agent on loopback."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from datetime import timedelta

import jwt
import pytest
import structlog
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from cronhooks_common.events import EventType, delivery_stream
from cronhooks_importer.rules import content_hash
from tests.support.agent import Received
from tests.support.flows import create_webhook, events_of, finished, retry_due, trigger
from tests.support.inprocess import eventually
from tests.support.system import System


def status(code: int, body: bytes = b"", headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=code, body=body, headers=headers)

    return respond


def json_answer(payload: object, code: int = 200):  # type: ignore[no-untyped-def]
    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.json_response(payload, status=code)

    return respond


async def test_request_carries_both_signatures_every_field_and_a_scoped_token(
    system: System,
) -> None:
    url = system.agent.url_for("hook", json_answer({"status": "ok"}))
    hook_id, secret = await create_webhook(
        system,
        system.admin,
        url,
        passApiKey=True,
        readPatterns=["notes/*"],
        writePatterns=["digests/*"],
        instruction="Generate a digest of the last day",
    )
    with structlog.testing.capture_logs() as logs:
        delivery_id = await trigger(system, system.admin, hook_id)
        [got] = await system.agent.wait_for(1, name="hook")
        await finished(system, system.admin, delivery_id)
    body = Webhook(secret).verify(got.raw, got.headers)
    assert set(body) == {
        "version",
        "id",
        "webhook_id",
        "kind",
        "timestamp",
        "scheduled_for",
        "trigger",
        "attempt",
        "missed_count",
        "instruction",
        "response_schema",
        "api_token",
        "api_url",
        "trace",  # CONTRACT §16.3: a root, without parent
    }
    assert body["kind"] == "cron" and body["api_url"] == system.settings.api_public_url
    assert body["trace"] == f"cron:{delivery_id}"
    claims = jwt.decode(body["api_token"], options={"verify_signature": False})
    assert claims["aud"] == "cronhooks-api" and claims["iss"] == system.settings.public_url
    assert claims["sub"] == f"webhook:{hook_id}" and claims["delivery_id"] == delivery_id
    assert claims["depth"] == 1
    assert (claims["kind"], claims["trace"]) == ("cron", f"cron:{delivery_id}")  # §16.3
    assert claims["read_patterns"] == ["notes/*"] and claims["write_patterns"] == ["digests/*"]
    assert claims["exp"] - claims["iat"] == system.settings.api_token_ttl_seconds
    assert jwt.get_unverified_header(body["api_token"])["alg"] == "HS256"
    # Neither the secret nor the token shows up in logs or events.
    dumped = json.dumps(logs, default=str)
    assert secret not in dumped and body["api_token"] not in dumped
    for event in await events_of(system.dsn, delivery_stream(delivery_id)):
        text = json.dumps(event["data"])
        assert body["api_token"] not in text and secret not in text


ADMIN_WHSEC = "whsec_" + base64.b64encode(b"an admin-chosen key of 32 bytes!").decode()


@pytest.mark.parametrize("given", [None, ADMIN_WHSEC, "an admin's plain secret, 24+ characters"])
async def test_trip2g_and_standard_webhooks_receivers_verify_a_delivery(
    system: System,
    given: str | None,
) -> None:
    """A generated, an admin-supplied whsec_ and a plain admin secret: a trip2g-style
    receiver (hex HMAC-SHA256 over the raw body, keyed with the secret string's bytes) and
    a Standard Webhooks library both accept the delivery as received."""
    fields = {} if given is None else {"secret": given}
    hook_id, secret = await create_webhook(
        system, system.admin, system.agent.url_for("signed", status(202)), **fields
    )
    assert given is None or secret == given
    await trigger(system, system.admin, hook_id)
    [got] = await system.agent.wait_for(1, name="signed")
    received = got.headers["X-Webhook-Signature"]
    expected = "sha256=" + hmac.new(secret.encode(), got.raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received, expected)
    verifier = Webhook(secret) if secret.startswith("whsec_") else Webhook(secret.encode())
    assert verifier.verify(got.raw, got.headers)["webhook_id"] == hook_id


ANSWERS = [
    # (name, responder, final status, error fragment)
    ("accepted", status(202, b'{"status":"accepted"}'), "success", None),
    ("empty", status(200), "success", None),
    ("html", status(200, b"<html>thanks</html>"), "success", None),
    ("ok-json", json_answer({"status": "ok", "message": "done"}), "success", None),
    (
        "agent-error",
        json_answer({"status": "error", "message": "no data today"}),
        "failed",
        "agent reported error: no data today",
    ),
    ("server-error", status(500, b"database on fire"), "failed", "HTTP 500: database on fire"),
    ("not-found", status(404), "failed", "HTTP 404"),
    (
        "redirect",
        status(302, headers={"Location": "http://127.0.0.1:1/elsewhere"}),
        "failed",
        "HTTP 302: redirects are not followed",
    ),
    ("huge", status(200, b"x" * ((1 << 20) + 1)), "failed", "response body over 1 MiB"),
]


@pytest.mark.parametrize(("name", "responder", "final", "error"), ANSWERS)
async def test_answers(system: System, name, responder, final, error) -> None:  # type: ignore[no-untyped-def]
    hook_id, _ = await create_webhook(system, system.admin, system.agent.url_for(name, responder))
    d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    assert d["status"] == final
    assert d["error"] == error if error is None else error in d["error"]
    [attempt] = d["attempts"]
    assert attempt["errorMessage"] == d["error"]
    assert json.loads(attempt["requestBody"])["id"] == d["id"]
    assert len(system.agent.at(name)) == 1
    if name == "huge":
        assert len(attempt["responseBody"]) <= 64 << 10  # the log keeps the first 64 KiB


async def test_a_cookie_an_agent_sets_is_never_sent_back(system: System) -> None:
    """Deliveries are independent requests: a `Set-Cookie` from one agent's answer must not
    ride along on later deliveries, of that webhook or of another at the same host."""

    async def sets_cookie(_: web.Request, __: Received) -> web.StreamResponse:
        response = web.json_response({})
        response.set_cookie("session", "agent-a-private", path="/")
        return response

    # By name: aiohttp's default jar keeps no cookies of an IP address, only of a host name.
    def by_name(url: str) -> str:
        return url.replace("127.0.0.1", "localhost")

    first, _ = await create_webhook(
        system, system.admin, by_name(system.agent.url_for("a", sets_cookie))
    )
    other, _ = await create_webhook(
        system, system.admin, by_name(system.agent.url_for("b", status(200, b"{}")))
    )
    for hook_id in (first, first, other):
        assert (await finished(system, system.admin, await trigger(system, system.admin, hook_id)))[
            "status"
        ] == "success"
    seen = [*system.agent.at("a"), *system.agent.at("b")]
    assert len(seen) == 3
    assert all("cookie" not in {k.lower() for k in got.headers} for got in seen)


async def test_timeout_fails_the_attempt(system: System) -> None:

    async def slow(_: web.Request, __: Received) -> web.StreamResponse:
        await asyncio.sleep(3)
        return web.Response(status=200)

    hook_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for("slow", slow), timeoutSeconds=1
    )
    d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    assert d["status"] == "failed" and d["error"] == "timeout after 1 s"
    assert d["responseStatus"] is None


async def test_connection_refused_fails_the_attempt(system: System) -> None:
    hook_id, _ = await create_webhook(system, system.admin, "http://127.0.0.1:9/nothing-listens")
    d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    assert d["status"] == "failed" and d["error"].startswith("connection error")


async def test_sync_changes_are_imported_before_success(system: System) -> None:
    answer = {
        "status": "ok",
        "changes": [{"path": "digests/2026-02-09.md", "content": "# Digest", "expected_hash": ""}],
    }
    hook_id, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("writer", json_answer(answer)),
        writePatterns=["digests/*"],
    )
    delivery_id = await trigger(system, system.admin, hook_id)
    d = await finished(system, system.admin, delivery_id)
    assert d["status"] == "success", d
    types = [e["type"] for e in await events_of(system.dsn, delivery_stream(delivery_id))]
    assert types == [
        EventType.DELIVERY_REQUESTED,
        EventType.DELIVERY_CHANGES_RECEIVED,
        EventType.NOTES_IMPORTED,
        EventType.DELIVERY_SUCCEEDED,
    ]
    [note] = await events_of(system.dsn, "note-digests/2026-02-09.md")
    assert note["data"]["content_hash"] == content_hash("# Digest")
    assert note["data"]["depth"] == 1 and note["data"]["version"] == 1


async def test_rejected_changes_fail_and_retry_with_the_importers_reasons(
    system: System,
) -> None:
    answer = {
        "status": "ok",
        "changes": [
            {"path": "digests/a.md", "content": "A", "expected_hash": "b" * 64},
            {"path": "secret/x.md", "content": "X"},
        ],
    }
    hook_id, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("bad-writer", json_answer(answer)),
        writePatterns=["digests/*"],
        maxRetries=1,
    )
    delivery_id = await trigger(system, system.admin, hook_id)
    await eventually(lambda: retry_due(system.dsn, delivery_id))
    system.clock.advance(timedelta(seconds=10))
    d = await finished(system, system.admin, delivery_id)
    assert d["status"] == "failed" and d["attempt"] == 2
    assert "secret/x.md: path is outside the write patterns" in d["error"]
    _first, second = system.agent.at("bad-writer")
    assert second.body["previous_error"].startswith(
        "changes rejected: secret/x.md: path is outside"
    )


async def test_retries_back_off_and_keep_the_delivery_id(system: System) -> None:
    answers = iter([status(500, b"try later"), status(503, b"busy"), json_answer({"status": "ok"})])

    async def flaky(request: web.Request, entry: Received) -> web.StreamResponse:
        return await next(answers)(request, entry)

    hook_id, secret = await create_webhook(
        system, system.admin, system.agent.url_for("flaky", flaky), maxRetries=2
    )
    delivery_id = await trigger(system, system.admin, hook_id)
    t0 = system.clock.now()
    assert await eventually(lambda: retry_due(system.dsn, delivery_id)) == t0 + timedelta(
        seconds=10
    )
    system.clock.advance(timedelta(seconds=10))
    await system.agent.wait_for(2, name="flaky")
    second_due = await eventually(lambda: retry_due(system.dsn, delivery_id))
    assert second_due == system.clock.now() + timedelta(seconds=30)
    system.clock.advance(timedelta(seconds=30))
    d = await finished(system, system.admin, delivery_id)
    assert d["status"] == "success" and d["attempt"] == 3 and d["trigger"] == "MANUAL"
    calls = system.agent.at("flaky")
    assert [c.body["attempt"] for c in calls] == [1, 2, 3]
    assert {c.body["id"] for c in calls} == {delivery_id}
    assert [c.body["trigger"] for c in calls] == ["manual", "retry", "retry"]
    assert [c.headers["X-Webhook-Attempt"] for c in calls] == ["1", "2", "3"]
    assert "previous_error" not in calls[0].body
    assert calls[1].body["previous_error"] == "HTTP 500: try later"
    assert calls[2].body["previous_error"] == "HTTP 503: busy"
    for call in calls:
        Webhook(secret).verify(call.raw, call.headers)
    assert [a["attempt"] for a in d["attempts"]] == [1, 2, 3]
    assert [a["responseStatus"] for a in d["attempts"]] == [500, 503, 200]


async def test_retry_after_from_the_agent_wins(system: System) -> None:
    hook_id, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("later", status(503, headers={"Retry-After": "120"})),
        maxRetries=1,
    )
    delivery_id = await trigger(system, system.admin, hook_id)
    due = await eventually(lambda: retry_due(system.dsn, delivery_id))
    assert due == system.clock.now() + timedelta(seconds=120)
    system.clock.advance(timedelta(seconds=119))
    await asyncio.sleep(0.3)
    assert len(system.agent.at("later")) == 1
    system.clock.advance(timedelta(seconds=1))
    await system.agent.wait_for(2, name="later")


async def test_gone_disables_the_webhook(system: System) -> None:
    hook_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for("gone", status(410)), maxRetries=3
    )
    d = await finished(system, system.admin, await trigger(system, system.admin, hook_id))
    assert d["status"] == "failed" and d["attempt"] == 1  # no retry after 410

    async def disabled() -> dict | None:  # type: ignore[type-arg]
        _, b = await system.graphql(
            system.admin, f"{{ cronWebhook(id: {hook_id}) {{ enabled disabledReason nextRunAt }} }}"
        )
        return b["data"]["cronWebhook"] if b["data"]["cronWebhook"]["disabledReason"] else None

    hook = await eventually(disabled)
    assert hook["enabled"] is False and hook["nextRunAt"] is None
    assert "410" in hook["disabledReason"]
    types = [e["type"] for e in await events_of(system.dsn, f"webhook-{hook_id}")]
    assert types[-1] == EventType.WEBHOOK_DISABLED
