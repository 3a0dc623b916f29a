"""The SDK's pure helpers: webhook signature verification (both schemes), the answer."""

from __future__ import annotations

import time

import pytest

from cronhooks_agent import SignatureError, SyncAnswer, verify_webhook
from cronhooks_agent.answers import content_hash
from cronhooks_common.signing import SecretKeys, generate_secret, signature_headers

BODY = b'{"version":1,"id":42}'


def signed(secret: str, stamp: int | None = None) -> dict[str, str]:
    return signature_headers(
        SecretKeys.of(secret),
        delivery_id="42",
        timestamp=stamp or int(time.time()),
        body=BODY,
        attempt=1,
    )


@pytest.mark.parametrize("secret", [generate_secret(), "a plain secret of 24+ characters"])
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
