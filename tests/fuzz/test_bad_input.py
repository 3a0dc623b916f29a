"""The bad-input suite: property tests (hypothesis) throwing odd input at every surface —
GraphQL, the token API, the agent-cron API and the answers of agents. Each must come back
as a named error or a recorded failure: never a 500, never a crash, never half-written."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronhooks_common.globs import pattern_problem
from cronhooks_common.settings import Settings
from cronhooks_common.tokens import ApiTokens
from tests.support.agent import Received
from tests.support.destinations import past_any_hold
from tests.support.flows import create_webhook, event_count, finished, trigger
from tests.support.graphql import CREATE_WEBHOOK
from tests.support.inprocess import Running
from tests.support.system import System
from tests.support.token_api import OPEN_WEBHOOK

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),  # FUZZ_EXAMPLES=1000 digs deeper
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

odd_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "a\x00b",
            "\ud800",  # a lone surrogate: JSON carries it as an escape
            "x\udfffy",
            "../../etc/passwd",
            "a//b",
            "/abs",
            "\u202e",
            "😀" * 50,
            "x" * 5000,
            "null",
            "[]",
            "{}",
            "* * * * *",
            "@daily",
            "61 * * * *",
            "http://127.0.0.1/",
            "http://[::1]/",
            "http://169.254.169.254/",
            "http://0x7f.1/",
            "http://2130706433/",
            "https://agent.example/hook",
            "whsec_!!!",
            "Europe/Berlin",
            "Mars/Base",
            "DELAY",  # concurrencyPolicy (CONTRACT §13)
            "nightly/reports-1",  # a valid executionGroup
            "g" * 101,
        ]
    ),
)
odd_int = st.one_of(
    st.integers(-10, 1000),
    # 3600/3601: jitterSeconds' bounds; 10**6 + 1: beyond maxDeliveriesPerDay's; 59/60,
    # 604800/604801: retryDeadlineSeconds' (CONTRACT §17)
    st.sampled_from(
        [-(2**31), 2**31 - 1, 0, 1, 59, 60, 900, 901, 3600, 3601, 604800, 604801, 10**6 + 1]
    ),
)
odd_value = st.one_of(
    odd_text,
    odd_int,
    st.booleans(),
    st.none(),
    st.lists(odd_text, max_size=4),
    st.floats(allow_nan=False),
    st.dictionaries(odd_text, odd_text, max_size=2),
)

CREATE_FIELDS = [
    "url",
    "cronSchedule",
    "instruction",
    "secret",
    "passApiKey",
    "timeoutSeconds",
    "maxDepth",
    "maxRetries",
    "enabled",
    "description",
    "readPatterns",
    "writePatterns",
    "timezone",
    "concurrencyPolicy",
    "catchUpPolicy",
    "misfireGraceSeconds",
    "executionGroup",
    "jitterSeconds",
    "maxDeliveriesPerDay",
    "retryDeadlineSeconds",
    "idempotencyKey",
]


# Things made once per test (per database) and reused by its examples.
_ONCE: dict[tuple[str, str], Any] = {}


pytestmark = pytest.mark.system(settings={"allow_private_targets": False}, open_webhook=True)


async def post_graphql(r: Running, token: str, query: str, variables: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{r.urls['admin-api']}/graphql",
            headers={"Authorization": f"Bearer {token}"},
            json={"query": query, "variables": variables},
        ) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


def encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def no_crash(status: int, body: Any) -> None:
    assert status < 500, body
    for error in body.get("errors", []) if isinstance(body, dict) else []:
        assert "Unexpected error" not in error["message"], error
        assert error["message"], error


@FUZZ
@given(
    fields=st.dictionaries(st.sampled_from(CREATE_FIELDS), odd_value, max_size=8),
    base=st.booleans(),
)
async def test_graphql_create_never_crashes_and_never_half_writes(
    system: System, fields, base
) -> None:  # type: ignore[no-untyped-def]
    payload = {"url": "https://agent.example/hook", "cronSchedule": "*/5 * * * *"} if base else {}
    payload.update(fields)
    before = await event_count(system.dsn)
    status, body = await post_graphql(
        system,
        system.admin,
        CREATE_WEBHOOK,
        {"input": payload},
    )
    no_crash(status, body)
    after = await event_count(system.dsn)
    if body.get("errors"):
        assert after == before  # nothing half-written
        first = body["errors"][0]
        if first.get("extensions", {}).get("code") == "BAD_USER_INPUT":
            assert first["extensions"]["field"] in [*CREATE_FIELDS, "limit"]
    else:
        assert after in (before, before + 1)  # one event, or none for a repeated idempotency key


@FUZZ
@given(
    fields=st.dictionaries(st.sampled_from(CREATE_FIELDS[:-1]), odd_value, max_size=6),
    target=st.one_of(st.just("existing"), odd_int),
)
async def test_graphql_update_never_crashes(system: System, fields, target) -> None:  # type: ignore[no-untyped-def]
    if not hasattr(test_graphql_update_never_crashes, "hook"):
        test_graphql_update_never_crashes.hook = (
            await create_webhook(  # type: ignore[attr-defined]
                system, system.admin, "https://agent.example/hook"
            )
        )[0]
    hook_id = test_graphql_update_never_crashes.hook if target == "existing" else target  # type: ignore[attr-defined]
    before = await event_count(system.dsn)
    status, body = await post_graphql(
        system,
        system.admin,
        """mutation($input: UpdateCronWebhookInput!) {
        updateCronWebhook(input: $input) { cronWebhook { id cronSchedule nextRunAt } } }""",
        {"input": {"id": hook_id, **fields}},
    )
    no_crash(status, body)
    if body.get("errors"):
        assert await event_count(system.dsn) == before


def api_token(settings: Settings, **claims: Any) -> str:
    return ApiTokens(
        master_key=settings.secret_key, issuer=settings.public_url, ttl_seconds=600
    ).mint(
        webhook_id=OPEN_WEBHOOK,
        delivery_id=1,
        depth=claims.get("depth", 1),
        read_patterns=claims.get("read", ["*"]),
        write_patterns=claims.get("write", ["fuzz/*"]),
        now=datetime.now(UTC),
        max_depth=claims.get("max_depth", 2),
    )


change = st.dictionaries(
    st.sampled_from(["path", "content", "expected_hash", "extra"]), odd_value, max_size=4
)
push_body = st.one_of(
    st.builds(lambda cs: {"changes": cs}, st.lists(change, max_size=5)),
    st.builds(lambda cs: {"changes": cs}, odd_value),
    odd_value.map(lambda v: {"notes": v}),
    odd_value,
)


@FUZZ
@given(body=push_body, raw=st.one_of(st.none(), st.binary(max_size=200)))
async def test_token_api_answers_with_listed_statuses_only(system: System, body, raw) -> None:  # type: ignore[no-untyped-def]
    before = await event_count(system.dsn)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{system.urls['importer']}/api/notes",
            headers={"Authorization": f"Bearer {api_token(system.settings)}"},
            data=raw if raw is not None else json.dumps(body),
        ) as resp,
    ):
        assert resp.status in (200, 400, 403, 409, 413), await resp.text()
        answer = await resp.json(content_type=None)
    conn = await asyncpg.connect(system.dsn)
    try:
        changed = await conn.fetchval(
            "select count(*) from eventstore.events where type = 'note.changed'"
        )
        imports = await conn.fetchval(
            "select count(*) from eventstore.events where type like 'notes.%'"
        )
    finally:
        await conn.close()
    if resp.status != 200:
        assert "error" in answer or "errors" in answer
        # a rejection writes no note.changed (only, for a batch, its notes.rejected verdict)
        assert await event_count(system.dsn) - before <= 1
    # the store holds nothing else but the open webhook's creation
    assert changed + imports + 1 == await event_count(system.dsn)


@FUZZ
@given(path=odd_text)
async def test_token_api_reads_odd_paths(system: System, path) -> None:  # type: ignore[no-untyped-def]
    assume(encodable(path))  # a URL carries UTF-8 only (a surrogate cannot be sent)
    async with aiohttp.ClientSession() as session:
        url = (
            f"{system.urls['importer']}/api/notes/{aiohttp.helpers.quote(path, safe='/')}"
            if path
            else f"{system.urls['importer']}/api/notes/x"
        )
        async with session.get(
            url, headers={"Authorization": f"Bearer {api_token(system.settings, read=['fuzz/*'])}"}
        ) as resp:
            assert resp.status in (200, 400, 403, 404), await resp.text()
        async with session.get(
            f"{system.urls['importer']}/api/notes",
            params={"pattern": path},
            headers={"Authorization": f"Bearer {api_token(system.settings)}"},
        ) as resp:
            assert resp.status in (200, 400), await resp.text()


@FUZZ
@given(
    body=st.one_of(
        st.dictionaries(
            st.sampled_from(["job_id", "fire_at", "agent_callback_url", "dedup_key", "x"]),
            odd_value,
            max_size=5,
        ),
        odd_value,
    )
)
async def test_agent_cron_provision_answers_200_or_a_named_400(system: System, body) -> None:  # type: ignore[no-untyped-def]
    if not hasattr(test_agent_cron_provision_answers_200_or_a_named_400, "token"):
        _, created = await post_graphql(
            system,
            system.admin,
            """mutation { createAgent(input: {
            instanceId: "fuzz", callbackUrl: "https://agent.example/"}) { accessToken } }""",
            {},
        )
        test_agent_cron_provision_answers_200_or_a_named_400.token = created["data"]["createAgent"][
            "accessToken"
        ]  # type: ignore[attr-defined]
    token = test_agent_cron_provision_answers_200_or_a_named_400.token  # type: ignore[attr-defined]
    async with aiohttp.ClientSession() as session:
        for path in ("provision", "cancel"):
            async with session.post(
                f"{system.urls['admin-api']}/api/agent-cron/{path}",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                answer = await resp.json(content_type=None)
                assert resp.status in (200, 400), answer
                if resp.status == 400:
                    assert answer["field"] and answer["error"]


agent_answer = st.tuples(
    st.sampled_from([200, 201, 202, 204, 301, 400, 404, 410, 429, 500, 503]),
    st.one_of(
        st.binary(max_size=300),
        odd_value.map(lambda v: json.dumps(v).encode()),
        st.builds(
            lambda cs: json.dumps({"status": "ok", "changes": cs}).encode(),
            st.lists(change, max_size=3),
        ),
    ),
    st.sampled_from([None, "5", "soon", "Mon, 09 Feb 2026 09:05:00 GMT", "-1"]),
)


# Private targets allowed: the agent of this property listens on loopback.
@pytest.mark.system(settings={"allow_private_targets": True}, open_webhook=False)
@FUZZ
@given(answer=agent_answer)
async def test_any_agent_answer_is_recorded_as_success_or_failure(system: System, answer) -> None:  # type: ignore[no-untyped-def]
    status, body, retry_after = answer
    headers = {"Retry-After": retry_after} if retry_after else {}

    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=status, body=body, headers=headers)

    name = f"a{len(system.agent.routes)}"
    hook_id, _ = await create_webhook(
        system, system.admin, system.agent.url_for(name, respond), writePatterns=["fuzz/*"]
    )
    d = await finished(
        system, system.admin, await trigger(system, system.admin, hook_id), timeout=20
    )
    assert d["status"] in ("success", "failed")
    assert d["status"] == "failed" or 200 <= status < 300
    if d["status"] == "failed":
        assert d["error"]
    [attempt] = d["attempts"]
    assert attempt["responseStatus"] == status
    await past_any_hold(system)  # a 429/503 + Retry-After held the agent's destination


# --- patterns (CONTRACT §8): checked like paths wherever a pattern is given ----------------

odd_pattern = st.one_of(
    odd_text,
    st.sampled_from(
        [
            "*",
            "digests/*",
            "../*",
            "x/../*",
            "..",
            "/abs/*",
            "a/**/b",
            "[",
            "[a-z]*.md",
            "*\x00",
            "\ud800*",
            "a\nb",
            "é" * 300,
            "x" * 513,
        ]
    ),
)


@FUZZ
@given(
    read=st.lists(odd_pattern, max_size=3),
    write=st.lists(odd_pattern, max_size=3),
    update=st.booleans(),
)
async def test_patterns_are_checked_alike_on_create_and_update(
    system: System, read, write, update
) -> None:  # type: ignore[no-untyped-def]
    fields = {"readPatterns": read, "writePatterns": write}
    if update:
        if not hasattr(test_patterns_are_checked_alike_on_create_and_update, "hook"):
            test_patterns_are_checked_alike_on_create_and_update.hook = (  # type: ignore[attr-defined]
                await create_webhook(system, system.admin, "https://agent.example/hook")
            )[0]
        query = """mutation($input: UpdateCronWebhookInput!) {
        updateCronWebhook(input: $input) { cronWebhook { readPatterns writePatterns } } }"""
        hook = test_patterns_are_checked_alike_on_create_and_update.hook  # type: ignore[attr-defined]
        variables = {"input": {"id": hook, **fields}}
    else:
        query = """mutation($input: CreateCronWebhookInput!) {
        createCronWebhook(input: $input) { cronWebhook { readPatterns writePatterns } } }"""
        variables = {"input": {"url": "https://agent.example/", "cronSchedule": "@daily", **fields}}
    before = await event_count(system.dsn)
    status, body = await post_graphql(system, system.admin, query, variables)
    no_crash(status, body)
    valid = all(pattern_problem(p) is None for p in [*read, *write])
    if body.get("errors"):
        assert await event_count(system.dsn) == before
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert body["errors"][0]["extensions"]["field"] in ("readPatterns", "writePatterns")
        assert not valid or len(read) > 100 or len(write) > 100
    else:
        assert valid  # every stored pattern obeys the one rule
        stored = next(iter(body["data"].values()))["cronWebhook"]
        assert stored == {"readPatterns": read, "writePatterns": write}


# --- the agent GraphQL API (CONTRACT §5) ----------------------------------------------------

update_input = st.dictionaries(
    st.sampled_from(["path", "content", "expectedHash", "extra"]), odd_value, max_size=4
)
agent_operation = st.one_of(
    st.builds(
        lambda updates, skip: (
            """mutation($input: PushNotesInput!) { pushNotes(input: $input) { __typename
            ... on PushNotesPayload { notes { id path contentHash version } }
            ... on ErrorPayload { message errors { path error } } } }""",
            {"input": {"updates": updates, **({} if skip is None else {"skipCommit": skip})}},
        ),
        st.one_of(st.lists(update_input, max_size=4), odd_value),
        st.one_of(st.none(), st.booleans(), odd_value),
    ),
    st.builds(
        lambda paths: (
            """mutation($paths: [String!]!) { hideNotes(input: {paths: $paths}) { __typename
            ... on ErrorPayload { errors { path error } } } }""",
            {"paths": paths},
        ),
        st.one_of(st.lists(odd_text, max_size=4), odd_value),
    ),
    st.just(("mutation { commitNotes { __typename ... on ErrorPayload { message } } }", {})),
    st.builds(
        lambda pattern: (
            "query($p: String) { notePaths(pattern: $p) { path version } }",
            {"p": pattern},
        ),
        odd_value,
    ),
    st.builds(
        lambda path: (
            "query($p: String!) { note(path: $p) { path content version } }",
            {"p": path},
        ),
        odd_value,
    ),
)


async def note_events(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "select count(*) from eventstore.events where type = 'note.changed'"
            )
        )
    finally:
        await conn.close()


@FUZZ
@given(operation=agent_operation)
async def test_agent_graphql_never_crashes_and_never_half_writes(system: System, operation) -> None:  # type: ignore[no-untyped-def]
    query, variables = operation
    before = await note_events(system.dsn)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{system.urls['importer']}/graphql",
            headers={
                "Authorization": f"Bearer {api_token(system.settings, read=['fuzz/*', 'a*'])}"
            },
            json={"query": query, "variables": variables},
        ) as resp,
    ):
        assert resp.status in (200, 400), await resp.text()
        body = await resp.json(content_type=None)
    no_crash(resp.status, body)
    for error in body.get("errors", []):
        assert error["extensions"]["code"] in (
            "BAD_USER_INPUT",
            "FORBIDDEN",
            "GRAPHQL_VALIDATION_FAILED",
        ), error
    after = await note_events(system.dsn)
    payload = next(iter((body.get("data") or {}).values()), None)
    if not isinstance(payload, dict) or payload.get("__typename") in (None, "ErrorPayload"):
        assert after == before  # refused: nothing written
    elif payload.get("__typename") == "PushNotesPayload":
        written = [n for n in payload["notes"] if n["version"] > 0]
        assert after - before == len(written)
        for note in payload["notes"]:
            assert pattern_problem(note["path"]) is None or note["path"].startswith("fuzz/")


@FUZZ
@given(path=odd_text, expected=st.one_of(st.none(), odd_text))
async def test_token_api_delete_answers_with_listed_statuses_only(
    system: System, path, expected
) -> None:  # type: ignore[no-untyped-def]
    assume(encodable(path) and (expected is None or encodable(expected)))
    url = f"{system.urls['importer']}/api/notes/{aiohttp.helpers.quote(path or 'x', safe='/')}"
    async with (
        aiohttp.ClientSession() as session,
        session.delete(
            url,
            params={} if expected is None else {"expected_hash": expected},
            headers={"Authorization": f"Bearer {api_token(system.settings)}"},
        ) as resp,
    ):
        assert resp.status in (200, 400, 403, 404, 409), await resp.text()


CHANGE_FIELDS = [
    "url",
    "includePatterns",
    "excludePatterns",
    "onCreate",
    "onUpdate",
    "onRemove",
    "includeContent",
    "instruction",
    "secret",
    "passApiKey",
    "timeoutSeconds",
    "maxDepth",
    "maxRetries",
    "readPatterns",
    "writePatterns",
    "enabled",
    "description",
    "retryDeadlineSeconds",
    "idempotencyKey",
]
odd_patterns = st.one_of(st.lists(odd_text, max_size=4), odd_value)


@FUZZ
@given(
    fields=st.dictionaries(
        st.sampled_from(CHANGE_FIELDS),
        st.one_of(odd_value, odd_patterns),
        max_size=8,
    ),
    base=st.booleans(),
)
async def test_change_webhook_create_never_crashes_and_never_half_writes(  # type: ignore[no-untyped-def]
    system: System, fields, base
) -> None:
    """Patterns and filters of change webhooks (CONTRACT §11): a change webhook, or a
    named error and nothing written."""
    payload = {"url": "https://agent.example/hook", "includePatterns": ["*"]} if base else {}
    payload.update(fields)
    before = await event_count(system.dsn)
    status, body = await post_graphql(
        system,
        system.admin,
        """mutation($input: CreateChangeWebhookInput!) {
        createChangeWebhook(input: $input) { secret changeWebhook { id includePatterns } } }""",
        {"input": payload},
    )
    no_crash(status, body)
    after = await event_count(system.dsn)
    if body.get("errors"):
        assert after == before
        first = body["errors"][0]
        if first.get("extensions", {}).get("code") == "BAD_USER_INPUT":
            assert first["extensions"]["field"] in CHANGE_FIELDS
    else:
        created = body["data"]["createChangeWebhook"]["changeWebhook"]
        assert created["includePatterns"], "a change webhook always has a pattern"
        assert all(pattern_problem(p) is None for p in created["includePatterns"])
        assert after in (before, before + 1)


@FUZZ
@given(
    name=st.one_of(odd_text, odd_value),
    skip=st.one_of(st.booleans(), odd_value),
    paths=st.one_of(st.lists(odd_text, max_size=4), odd_value),
)
async def test_api_keys_and_manual_change_triggers_answer_named_errors(  # type: ignore[no-untyped-def]
    system: System, name, skip, paths
) -> None:
    before = await event_count(system.dsn)
    status, body = await post_graphql(
        system,
        system.admin,
        """mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) {
        key apiKey { id name } } }""",
        {"input": {"name": name, "skipWebhooks": skip}},
    )
    no_crash(status, body)
    if body.get("errors"):
        assert await event_count(system.dsn) == before
        first = body["errors"][0]
        if first.get("extensions", {}).get("code") == "BAD_USER_INPUT":
            assert first["extensions"]["field"] in ("name", "skipWebhooks", "input")
    else:
        assert body["data"]["createApiKey"]["key"].startswith("chk_")
    if not hasattr(test_api_keys_and_manual_change_triggers_answer_named_errors, "hook"):
        _, created = await post_graphql(
            system,
            system.admin,
            """mutation { createChangeWebhook(input: {url: "https://agent.example/hook",
            includePatterns: ["*"]}) { changeWebhook { id } } }""",
            {},
        )
        test_api_keys_and_manual_change_triggers_answer_named_errors.hook = created["data"][  # type: ignore[attr-defined]
            "createChangeWebhook"
        ]["changeWebhook"]["id"]
    hook = test_api_keys_and_manual_change_triggers_answer_named_errors.hook  # type: ignore[attr-defined]
    before = await event_count(system.dsn)
    status, body = await post_graphql(
        system,
        system.admin,
        "mutation($id: Int!, $paths: [String!]!) { triggerChangeWebhook(id: $id, paths: $paths)"
        " { deliveryId } }",
        {"id": hook, "paths": paths},
    )
    no_crash(status, body)
    # No note exists in this database: every trigger is refused, naming the paths.
    assert body.get("errors"), body
    assert await event_count(system.dsn) == before
    first = body["errors"][0]
    if first.get("extensions", {}).get("code") == "BAD_USER_INPUT":
        assert first["extensions"]["field"] in ("paths", "id")


odd_moment = st.one_of(
    odd_value,
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
    st.sampled_from(["2026-02-30T00:00:00Z", "2026-02-09T09:00:00", "0001-01-01T00:00:00+00:00"]),
)


@FUZZ
@given(
    webhook_id=st.one_of(st.just(OPEN_WEBHOOK), odd_value),
    since=odd_moment,
    until=st.one_of(st.none(), odd_moment),
)
async def test_replay_deliveries_answers_named_errors_and_writes_nothing_odd(  # type: ignore[no-untyped-def]
    system: System, webhook_id, since, until
) -> None:
    """No delivery of this database ever failed: a replay answers no id or a named error,
    and writes nothing either way."""
    before = await event_count(system.dsn)
    status, body = await post_graphql(
        system,
        system.admin,
        """mutation($webhookId: Int!, $since: DateTime!, $until: DateTime) {
        replayDeliveries(webhookId: $webhookId, since: $since, until: $until) { deliveryIds } }""",
        {"webhookId": webhook_id, "since": since, "until": until},
    )
    no_crash(status, body)
    assert await event_count(system.dsn) == before
    if body.get("errors"):
        ext = body["errors"][0].get("extensions", {})
        assert ext.get("code") in ("BAD_USER_INPUT", "NOT_FOUND"), body
        if ext["code"] == "BAD_USER_INPUT":
            assert ext["field"] in ("webhookId", "since", "until"), body
    else:
        assert body["data"]["replayDeliveries"] == {"deliveryIds": []}


@pytest.fixture
def no_debug_waits(system: System) -> None:
    """The debug endpoint's told delays, without waiting for them."""

    async def no_wait(_: float) -> None:
        return None

    system.services["admin-api"].debug.sleep = no_wait


debug_param = st.one_of(odd_text, odd_int.map(str), st.sampled_from(["250ms", "1m", "60s", "1h"]))


@pytest.mark.system(
    services=("admin-api",),
    settings={"allow_private_targets": True, "dev_mode": True},
    open_webhook=False,
)
@pytest.mark.usefixtures("no_debug_waits")
@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(["status", "delay", "body", "last", "id"]), debug_param, max_size=3
    ),
    raw=st.binary(max_size=200),
)
async def test_debug_endpoints_answer_as_told_or_a_named_400(system: System, params, raw) -> None:  # type: ignore[no-untyped-def]
    assume(all(encodable(k) and encodable(v) for k, v in params.items()))
    async with aiohttp.ClientSession() as session:
        url = system.urls["admin-api"]
        async with session.post(f"{url}/debug/test_webhook", params=params, data=raw) as resp:
            answer = await resp.read()
            if resp.status == 400:
                named = json.loads(answer)
                assert named["field"] in ("status", "delay"), named
            else:
                assert resp.status == int(params.get("status", 200)), answer
        for method, path in (("GET", "test_webhook_calls"), ("POST", "run_cron_job")):
            async with session.request(method, f"{url}/debug/{path}", params=params) as resp:
                assert resp.status in (200, 400, 404), await resp.text()
                if resp.status == 400:
                    assert (await resp.json())["field"] in ("last", "id")
