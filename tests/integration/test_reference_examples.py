"""The examples of docs/reference/ run against the real services, so the reference stays true.

* graphql.md: every ```graphql block followed by a ```json block is sent, in page order, to
  a fresh admin-api; the answer must have the shape shown (the same keys, lists empty or
  not alike, the same JSON types, nulls where the page shows null), the same booleans and
  enum values, and errors with the same codes, fields and — unless the page elides it with
  "…" — the same message.
* webhooks.md: the Python verification snippets are run on requests the dispatcher really
  signed, for a generated `whsec_` secret and for a plain admin-chosen one; the example
  bodies have the keys real bodies have.
* agent-api.md: the fire-JWT snippet verifies a real trigger callback; the REST curls run in
  bash as written (API and KEY set to a real importer and API key) and answer as shown.

`DOCS_DUMP=FILE` writes every real answer to FILE, one JSON line each (to write a new
example's answer from).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from cronhooks_common.clock import SystemClock
from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.flows import (
    create_agent,
    create_api_key,
    create_change_webhook,
    create_webhook,
    provision,
    push_notes,
    trigger,
)
from tests.support.inprocess import Running, admin_token, eventually, running

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"
EXAMPLE = re.compile(r"```graphql\n(.*?)```\n\n```json\n(.*?)```", re.S)
CODE = re.compile(r"```(\w*)\n(.*?)```", re.S)
ENUM = re.compile(r"^[A-Z][A-Z_]+$")
DUMP = bool(os.environ.get("DOCS_DUMP"))


def page(name: str) -> str:
    return (REFERENCE / name).read_text()


def blocks(name: str, language: str) -> list[str]:
    return [body for lang, body in CODE.findall(page(name)) if lang == language]


def block_after(name: str, marker: str) -> str:
    """The first code block after `marker` on the page."""
    text = page(name)
    found: str = CODE.findall(text[text.index(marker) :])[0][1]
    return found


def dump(answers: list[str]) -> None:
    Path(os.environ["DOCS_DUMP"]).write_text("".join(a + "\n" for a in answers))


def mismatch(expected: Any, actual: Any, where: str = "") -> str | None:
    """Why `actual` does not have the shape of `expected`, or None."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {actual!r}"
        if set(expected) != set(actual):
            return f"{where}: keys {sorted(expected)} != {sorted(actual)}"
        for key, value in expected.items():
            if key == "extensions" or (key == "message" and "…" not in str(value)):
                if value != actual[key]:
                    return f"{where}.{key}: {value!r} != {actual[key]!r}"
                continue
            problem = mismatch(value, actual[key], f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or bool(expected) != bool(actual):
            return f"{where}: expected {expected!r}, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            problem = mismatch(e, a, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if expected is None or actual is None:
        return None if expected is actual else f"{where}: {expected!r} != {actual!r}"
    if isinstance(expected, bool) or (isinstance(expected, str) and ENUM.match(expected)):
        return None if expected == actual else f"{where}: {expected!r} != {actual!r}"
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(actual, numbers):
        return None
    if type(expected) is not type(actual):
        return f"{where}: {expected!r} and {actual!r} differ in type"
    return None


async def test_every_graphql_example_answers_as_shown(settings: Settings) -> None:
    examples = EXAMPLE.findall(page("graphql.md"))
    assert len(examples) > 30, "the examples were not found: did the page's format change?"
    async with running(settings, SystemClock(), ("admin-api", "importer")) as r:
        token = await admin_token(settings.database_url, "docs")
        status, body = await r.graphql(None, "{ cronWebhooks { id } }")
        assert status == 401
        assert body == json.loads(block_after("graphql.md", "Without a valid token"))
        failures = []
        answers: list[str] = []
        for query, answer in examples:
            _, body = await r.graphql(token, query)
            if DUMP:
                answers.append(json.dumps(body, ensure_ascii=False))
            problem = mismatch(json.loads(answer), body)
            if problem:
                failures.append(f"{query.strip()[:70]}…\n  {problem}\n  got {json.dumps(body)}")
        if DUMP:
            dump(answers)
        # The limit example: 101 fields nextRuns(count: 100) under aliases.
        aliases = " ".join(f"a{i}: nextRuns(count: 100)" for i in range(101))
        _, body = await r.graphql(token, f"{{ cronWebhooks {{ {aliases} }} }}")
        shown = json.loads(block_after("graphql.md", "aliases in one query:"))
        if body != shown:
            failures.append(f"the limit example\n  got {json.dumps(body)}")
        # The nesting example: `v` holds 63 arrays, 65 levels in all.
        deep = '{"query": "{ __typename }", "variables": {"v": %s}}' % ("[" * 63 + "]" * 63)
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{r.urls['admin-api']}/graphql",
                data=deep,
                headers={"Authorization": f"Bearer {token}"},
            ) as resp,
        ):
            status, body = resp.status, await resp.json()
        shown = json.loads(block_after("graphql.md", "A body nested deeper than 64 levels"))
        if (status, body) != (400, shown):
            failures.append(f"the nesting example\n  got {status} {json.dumps(body)}")
    assert not failures, "\n".join(failures)


# --- webhooks.md: the signature snippets on really signed requests ------------------------


def snippets() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    for code in blocks("webhooks.md", "python"):
        exec(compile(code, "webhooks.md", "exec"), namespace)
    return namespace


async def delivered(r: Running, token: str, agent: Agent, **fields: Any) -> tuple[str, Received]:
    """A real delivery of a new webhook with `fields`: (its secret, what the agent got)."""
    webhook_id, secret = await create_webhook(r, token, agent.url, cronSchedule="@yearly", **fields)
    delivery_id = await trigger(r, token, webhook_id)

    async def arrived() -> Received | None:
        return next((x for x in agent.received if x.body["id"] == delivery_id), None)

    return secret, await eventually(arrived)


def json_example(name: str, marker: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(block_after(name, marker))
    return parsed


async def test_the_signature_snippets_verify_real_requests(
    settings: Settings, agent: Agent
) -> None:
    code = snippets()
    async with running(settings, SystemClock(), ("admin-api", "dispatcher", "importer")) as r:
        token = await admin_token(settings.database_url, "docs")
        plain = "a plain secret of the admin, 24+ characters"
        for fields in ({"passApiKey": True}, {"secret": plain}):
            secret, got = await delivered(r, token, agent, **fields)
            assert secret.startswith("whsec_") == ("secret" not in fields)
            assert code["verify_standard"](secret, got.headers, got.raw) == got.body
            assert code["standard_ok"](secret, got.headers, got.raw)
            assert code["trip2g_ok"](secret, got.headers, got.raw)
            forged = got.raw.replace(b'"attempt":1', b'"attempt":2')
            assert forged != got.raw
            assert not code["standard_ok"](secret, got.headers, forged)
            assert not code["trip2g_ok"](secret, got.headers, forged)
            with pytest.raises(code["WebhookVerificationError"]):
                code["verify_standard"](secret, got.headers, forged)
            other = "whsec_" + "A" * 43 + "=" if secret.startswith("whsec_") else plain + "x"
            with pytest.raises(code["WebhookVerificationError"]):
                code["verify_standard"](other, got.headers, got.raw)
            assert not code["standard_ok"](other, got.headers, got.raw)
            assert not code["trip2g_ok"](other, got.headers, got.raw)
        # The example body of a cron delivery has the keys of a real one (a first
        # attempt has no previous_error; this one passed an api_token).
        first = agent.received[0].body
        shown = json_example("webhooks.md", "### Body of a cron webhook")
        assert set(shown) - {"previous_error"} == set(first)
        assert shown["response_schema"] == first["response_schema"]
        headers = {k.lower() for k in agent.received[0].headers}
        table = page("webhooks.md").split("## The request")[1].split("###")[0]
        for line in block_after("webhooks.md", "## The request").splitlines()[1:]:
            assert line.split(":")[0].lower() in headers, line
        assert "x-webhook-attempt" in table.lower()
        # CONTRACT §17: the v1a snippet verifies a real ED25519 delivery with the publicKey.
        await ed25519_snippet_verifies(r, token, agent, code)


async def ed25519_snippet_verifies(r: Running, token: str, agent: Agent, code: Any) -> None:
    _, got = await delivered(r, token, agent, signatureScheme="ED25519")
    _, body = await r.graphql(token, "{ cronWebhooks { publicKey } }")
    [key] = [w["publicKey"] for w in body["data"]["cronWebhooks"] if w["publicKey"]]
    assert code["v1a_ok"](key, got.headers, got.raw)
    assert not code["v1a_ok"](key, got.headers, got.raw + b" ")
    assert not code["v1a_ok"]("whpk_" + "A" * 43 + "=", got.headers, got.raw)


async def test_the_change_body_example_has_the_keys_of_a_real_one(
    settings: Settings, agent: Agent
) -> None:
    async with running(settings, SystemClock(), ("admin-api", "dispatcher", "importer")) as r:
        token = await admin_token(settings.database_url, "docs")
        await create_change_webhook(
            r, token, agent.url, includePatterns=["blog/*"], instruction="Check spelling"
        )
        await push_notes(r, token, ("blog/post.md", "test"))
        got = await eventually(lambda: _first(agent))
        shown = json_example("webhooks.md", "### Body of a change webhook")
        assert set(shown) == set(got.body)
        assert set(shown["changes"][0]) == set(got.body["changes"][0])
        assert shown["changes"][0]["content_hash"] == got.body["changes"][0]["content_hash"]


async def _first(agent: Agent) -> Received | None:
    return agent.received[0] if agent.received else None


# --- agent-api.md: the fire-JWT snippet on a real callback --------------------------------


async def test_the_fire_jwt_snippet_verifies_a_real_callback(settings: Settings) -> None:
    fires: list[tuple[str, dict[str, Any]]] = []

    async def fire(request: web.Request, _: Received) -> web.StreamResponse:
        fires.append((request.headers["Authorization"], await request.json()))
        return web.json_response({"ok": True})

    agent = await Agent().start()
    agent.url_for("api/cron/fire", fire)
    callback = f"http://127.0.0.1:{agent.port}"
    try:
        async with running(settings, SystemClock()) as r:
            token = await admin_token(settings.database_url, "docs")
            access, _ = await create_agent(r, token, callback, "hermes-1")
            answer = await provision(
                r, access, job_id="daily-digest", fire_at="2026-02-09T09:00:00+01:00"
            )
            assert set(answer) == {"schedule_id"}
            await eventually(lambda: _some(fires))
            [code] = [c for c in blocks("agent-api.md", "python") if "PyJWKClient" in c]
            code = code.replace(
                "http://127.0.0.1:8080/.well-known", r.urls["admin-api"] + "/.well-known"
            )
            namespace: dict[str, Any] = {}
            exec(compile(code, "agent-api.md", "exec"), namespace)
            authorization, fire_body = fires[0]
            assert fire_body == {"job_id": "daily-digest", "fire_at": "2026-02-09T09:00:00+01:00"}
            claims = await asyncio.to_thread(
                namespace["verify_fire"], authorization, fire_body, "hermes-1"
            )
            assert claims["purpose"] == "cron_fire"
            with pytest.raises(namespace["jwt"].PyJWTError):
                await asyncio.to_thread(
                    namespace["verify_fire"], authorization, fire_body, "hermes-2"
                )
    finally:
        await agent.stop()


async def _some(items: list[Any]) -> bool:
    return bool(items)


# --- agent-api.md: the REST curls, run by bash as written ---------------------------------


def _curls(block: str) -> list[tuple[str, str]]:
    """(command, the answer its `# ` line shows) for each curl of a ```sh block."""
    lines = block.replace("\\\n", " ").splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("curl "):
            shown = lines[i + 1].removeprefix("# ")
            found.append((line, re.sub(r"^\d{3} ", "", shown)))  # curl -s prints the body only
    return found


def _same_shape(shown: str, actual: Any) -> str | None:
    expected = json.loads(shown.replace("[...]", '"…any"'))
    for key, value in list(expected.items()):
        if value == "…any":  # `[...]` on the page: whatever it holds
            expected[key] = actual.get(key) if isinstance(actual, dict) else None
    return mismatch(expected, actual)


async def test_the_rest_curls_answer_as_shown(settings: Settings) -> None:
    [nesting, series] = [b for b in blocks("agent-api.md", "sh") if "$API/api/notes" in b]
    assert series.startswith("API=http://127.0.0.1:8081\nKEY=chk_…")
    async with running(settings, SystemClock(), ("admin-api", "importer")) as r:
        token = await admin_token(settings.database_url, "docs")
        _, key = await create_api_key(r, token, name="docs")
        env = {**os.environ, "API": r.urls["importer"], "KEY": key}
        failures = []
        curls = _curls(nesting) + _curls(series)
        assert len(curls) == 8, curls
        for command, shown in curls:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", command, env=env, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await proc.communicate()
            problem = _same_shape(shown, json.loads(out))
            if problem:
                failures.append(f"{command[:70]}…\n  {problem}\n  got {out.decode()}")
    assert not failures, "\n".join(failures)
