"""Admin GraphQL over real HTTP on loopback, against the real database and broker."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
import structlog

from tests.support.flows import event_count
from tests.support.graphql import CREATE_WEBHOOK_IN_FULL
from tests.support.system import System

T0 = datetime(2026, 2, 9, 9, 2, 30, tzinfo=UTC)


pytestmark = pytest.mark.system(services=("admin-api",), start=T0)


def webhook_input(**over: object) -> dict[str, object]:
    return {
        "url": "https://agent.example/hook",
        "cronSchedule": "*/5 * * * *",
        "instruction": "digest",
        **over,
    }


async def test_missing_or_unknown_token_is_unauthenticated(system: System) -> None:
    for token in (None, "cha_nope"):
        status, body = await system.graphql(token, "{ cronWebhooks { id } }")
        assert status == 401
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_create_returns_secret_once_and_computes_next_run(system: System) -> None:
    status, body = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input()}
    )
    assert status == 200, body
    payload = body["data"]["createCronWebhook"]
    hook = payload["cronWebhook"]
    assert payload["secret"].startswith("whsec_")
    assert hook["hasSecret"] is True
    assert hook["timezone"] == "UTC"
    assert hook["nextRunAt"] == "2026-02-09T09:05:00.000Z"
    assert hook["nextRuns"] == [
        "2026-02-09T09:05:00.000Z",
        "2026-02-09T09:10:00.000Z",
        "2026-02-09T09:15:00.000Z",
    ]
    assert (hook["readPatterns"], hook["writePatterns"]) == (["*"], [])
    assert (hook["timeoutSeconds"], hook["maxRetries"], hook["maxDepth"]) == (60, 0, 1)
    assert (hook["concurrencyPolicy"], hook["catchUpPolicy"]) == ("ALLOW", "LATEST_ONCE")
    # The secret is stored encrypted, not in plain text, and no event carries it.
    conn = await asyncpg.connect(system.dsn)
    try:
        sealed = await conn.fetchval("select ciphertext from shared.webhook_secrets")
        assert payload["secret"].encode() not in sealed
        dump = await conn.fetchval("select string_agg(data::text, ' ') from eventstore.events")
        assert payload["secret"] not in dump
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"cronSchedule": "61 * * * *"}, "cronSchedule"),
        ({"cronSchedule": "@fortnightly"}, "cronSchedule"),
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"timeoutSeconds": 0}, "timeoutSeconds"),
        ({"maxRetries": 99}, "maxRetries"),
        ({"secret": "too-short"}, "secret"),
        ({"idempotencyKey": ""}, "idempotencyKey"),
    ],
)
async def test_bad_input_names_the_field_and_changes_nothing(system: System, over, field) -> None:  # type: ignore[no-untyped-def]
    before = await event_count(system.dsn)
    _, body = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(**over)}
    )
    error = body["errors"][0]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "field": field}
    assert field in error["message"]
    assert await event_count(system.dsn) == before


async def test_idempotency_key_returns_the_first_result(system: System) -> None:
    results = await asyncio.gather(
        *(
            system.graphql(
                system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-1")}
            )
            for _ in range(5)
        )
    )
    ids = {b["data"]["createCronWebhook"]["cronWebhook"]["id"] for _, b in results}
    secrets = {b["data"]["createCronWebhook"]["secret"] for _, b in results}
    assert len(ids) == 1 and len(secrets) == 1
    _, listing = await system.graphql(system.admin, "{ cronWebhooks { id } }")
    assert len(listing["data"]["cronWebhooks"]) == 1
    assert await event_count(system.dsn) == 1


@pytest.mark.parametrize(
    ("then", "code"),
    [
        ("mutation { regenerateCronWebhookSecret(id: ID) { secret } }", "CONFLICT"),
        (
            'mutation { updateCronWebhook(input: {id: ID, secret: "a replaced secret of 24+ chars"})'
            " { cronWebhook { id } } }",
            "CONFLICT",
        ),
        ("mutation { deleteCronWebhook(id: ID) { id } }", "NOT_FOUND"),
    ],
)
async def test_a_replayed_idempotency_key_never_reveals_a_secret_again(
    system: System, then, code
) -> None:  # type: ignore[no-untyped-def]
    """CONTRACT §15: a replay answers the first result only while it is still true."""
    _, first = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-2")}
    )
    created = first["data"]["createCronWebhook"]
    hook_id = created["cronWebhook"]["id"]
    _, again = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-2")}
    )
    assert again["data"]["createCronWebhook"]["secret"] == created["secret"]  # still true
    _, body = await system.graphql(system.admin, then.replace("ID", str(hook_id)))
    assert "errors" not in body, body
    _, replay = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-2")}
    )
    assert replay["data"] is None or replay["data"].get("createCronWebhook") is None
    assert replay["errors"][0]["extensions"]["code"] == code
    dumped = json.dumps(replay)
    assert created["secret"] not in dumped
    secret = body["data"].get("regenerateCronWebhookSecret", {}) or {}
    assert not secret or secret["secret"] not in dumped


async def test_an_idempotency_key_is_kept_24_hours(system: System) -> None:
    _, first = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-3")}
    )
    system.clock.advance(timedelta(hours=23, minutes=59))
    _, again = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-3")}
    )
    first_id = first["data"]["createCronWebhook"]["cronWebhook"]["id"]
    assert again["data"]["createCronWebhook"]["cronWebhook"]["id"] == first_id
    system.clock.advance(timedelta(minutes=2))
    _, later = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(idempotencyKey="k-3")}
    )
    assert later["data"]["createCronWebhook"]["cronWebhook"]["id"] != first_id


async def test_update_pause_resume_delete(system: System) -> None:
    _, body = await system.graphql(system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input()})
    hook_id = body["data"]["createCronWebhook"]["cronWebhook"]["id"]
    update = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
        cronWebhook { cronSchedule timezone enabled nextRunAt } } }"""
    _, body = await system.graphql(
        system.admin,
        update,
        {"input": {"id": hook_id, "cronSchedule": "0 9 * * *", "timezone": "Europe/Berlin"}},
    )
    hook = body["data"]["updateCronWebhook"]["cronWebhook"]
    assert hook["nextRunAt"] == "2026-02-10T08:00:00.000Z"  # 09:00 Berlin (CET) tomorrow
    _, body = await system.graphql(
        system.admin, update, {"input": {"id": hook_id, "enabled": False}}
    )
    assert body["data"]["updateCronWebhook"]["cronWebhook"]["nextRunAt"] is None
    _, body = await system.graphql(
        system.admin, update, {"input": {"id": hook_id, "cronSchedule": "bad"}}
    )
    assert body["errors"][0]["extensions"]["field"] == "cronSchedule"
    _, body = await system.graphql(
        system.admin, update, {"input": {"id": hook_id, "enabled": True}}
    )
    assert (
        body["data"]["updateCronWebhook"]["cronWebhook"]["nextRunAt"] == "2026-02-10T08:00:00.000Z"
    )

    _, body = await system.graphql(
        system.admin, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}"
    )
    assert body["data"]["deleteCronWebhook"]["id"] == hook_id
    _, body = await system.graphql(system.admin, "{ cronWebhooks { id } }")
    assert body["data"]["cronWebhooks"] == []
    # A deleted webhook is unknown everywhere: null, in no list, nothing can be done to it.
    _, body = await system.graphql(
        system.admin, f"{{ cronWebhook(id: {hook_id}) {{ id enabled nextRunAt }} }}"
    )
    assert body["data"]["cronWebhook"] is None
    for operation in (
        f"query {{ cronWebhookDeliveries(cronWebhookId: {hook_id}) {{ id }} }}",
        f"mutation {{ triggerCronWebhook(webhookId: {hook_id}) {{ deliveryId }} }}",
        f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}",
        f"mutation {{ regenerateCronWebhookSecret(id: {hook_id}) {{ secret }} }}",
    ):
        _, body = await system.graphql(system.admin, operation)
        assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND", (operation, body)
    _, body = await system.graphql(
        system.admin, update, {"input": {"id": hook_id, "enabled": True}}
    )
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_unknown_ids_are_not_found(system: System) -> None:
    for mutation in (
        "triggerCronWebhook(webhookId: 999) { deliveryId }",
        "deleteCronWebhook(id: 999) { id }",
        "regenerateCronWebhookSecret(id: 999) { secret }",
    ):
        _, body = await system.graphql(system.admin, f"mutation {{ {mutation} }}")
        assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND", body


async def test_regenerate_secret_returns_a_new_one(system: System) -> None:
    _, body = await system.graphql(system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input()})
    first = body["data"]["createCronWebhook"]
    _, body = await system.graphql(
        system.admin,
        f"mutation {{ regenerateCronWebhookSecret(id: {first['cronWebhook']['id']})"
        " { secret cronWebhook { hasSecret } } }",
    )
    second = body["data"]["regenerateCronWebhookSecret"]
    assert second["secret"].startswith("whsec_") and second["secret"] != first["secret"]
    assert second["cronWebhook"]["hasSecret"] is True


OPERATIONS = [
    "{ cronWebhooks { id } }",
    "{ cronWebhook(id: 1) { id } }",
    "{ cronWebhookDeliveries(cronWebhookId: 1) { id } }",
    "{ cronWebhookDelivery(id: 1) { id } }",
    '{ note(path: "a") { path } }',
    "{ notes { path } }",
    'mutation { createCronWebhook(input: {url: "https://a.example/", cronSchedule: "* * * * *"}) { secret } }',
    'mutation { updateCronWebhook(input: {id: 1, description: "x"}) { cronWebhook { id } } }',
    "mutation { deleteCronWebhook(id: 1) { id } }",
    "mutation { regenerateCronWebhookSecret(id: 1) { secret } }",
    "mutation { triggerCronWebhook(webhookId: 1) { deliveryId } }",
]


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_every_operation_needs_a_token(system: System, operation: str) -> None:
    status, body = await system.graphql(None, operation)
    assert status == 401 and body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert "data" not in body


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "ftp://x/"}, "url"),
        ({"cronSchedule": "* * * *"}, "cronSchedule"),
        ({"timezone": "Nowhere/Town"}, "timezone"),
        ({"timeoutSeconds": 1000}, "timeoutSeconds"),
        ({"maxRetries": -1}, "maxRetries"),
        ({"maxDepth": 0}, "maxDepth"),
        ({"misfireGraceSeconds": -5}, "misfireGraceSeconds"),
        ({"instruction": "x" * (64 * 1024 + 1)}, "instruction"),
        ({"description": "d" * 5000}, "description"),
        ({"readPatterns": ["[bad"]}, "readPatterns"),
        ({"writePatterns": [""]}, "writePatterns"),
        ({"readPatterns": ["../*"]}, "readPatterns"),
        ({"writePatterns": ["x/../*"]}, "writePatterns"),
        ({"writePatterns": ["/abs/*"]}, "writePatterns"),
        ({"secret": "short"}, "secret"),
        # values GraphQL itself refuses: the field is named all the same
        ({"catchUpPolicy": "SOMETIMES"}, "catchUpPolicy"),
        ({"concurrencyPolicy": "NEVER"}, "concurrencyPolicy"),
        ({"timeoutSeconds": "sixty"}, "timeoutSeconds"),
        ({"enabled": "yes"}, "enabled"),
        ({"readPatterns": ["a", 5]}, "readPatterns"),
        ({"nope": 1}, "nope"),
    ],
)
async def test_update_validation_names_the_field_and_changes_nothing(
    system: System, fields, field
) -> None:  # type: ignore[no-untyped-def]
    _, body = await system.graphql(system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input()})
    hook = body["data"]["createCronWebhook"]["cronWebhook"]
    before = await event_count(system.dsn)
    _, body = await system.graphql(
        system.admin,
        """mutation($input: UpdateCronWebhookInput!) {
        updateCronWebhook(input: $input) { cronWebhook { id } } }""",
        {"input": {"id": hook["id"], **fields}},
    )
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": field}
    assert await event_count(system.dsn) == before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"catchUpPolicy": "SOMETIMES"}, "catchUpPolicy"),
        ({"maxRetries": 1.5}, "maxRetries"),
        ({"readPatterns": ["../*"]}, "readPatterns"),
        ({"writePatterns": ["/abs/*"]}, "writePatterns"),
    ],
)
async def test_create_with_a_value_graphql_refuses_names_the_field(
    system: System, fields, field
) -> None:  # type: ignore[no-untyped-def]
    _, body = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input(**fields)}
    )
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": field}
    assert await event_count(system.dsn) == 0


@pytest.mark.parametrize(
    ("literal", "field"),
    [
        ("catchUpPolicy: SOMETIMES", "catchUpPolicy"),
        ('timeoutSeconds: "x"', "timeoutSeconds"),
        ('readPatterns: ["a", 5]', "readPatterns"),
        ("color: RED", "color"),
    ],
)
async def test_inline_literals_graphql_refuses_name_the_field(
    system: System, literal: str, field: str
) -> None:
    status, body = await system.graphql(
        system.admin,
        f"""mutation {{ createCronWebhook(input: {{url: "https://a.example/",
        cronSchedule: "* * * * *", {literal}}}) {{ secret }} }}""",
    )
    assert status == 400
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": field}


async def test_missing_required_input_and_arguments_name_the_field(system: System) -> None:
    _, body = await system.graphql(
        system.admin, CREATE_WEBHOOK_IN_FULL, {"input": {"url": "https://a.example/"}}
    )
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "cronSchedule"}
    _, body = await system.graphql(system.admin, "{ cronWebhook { id } }")
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "field": "id"}
    _, body = await system.graphql(system.admin, "{ cronWebhook(id: 1) { nope } }")
    assert body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    _, body = await system.graphql(system.admin, "{ cronWebhook(id: 1) { id ")
    assert body["errors"][0]["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"


async def test_secrets_in_a_refused_mutation_stay_out_of_the_logs(system: System) -> None:
    secret = "an inline secret that must never be logged 0123"
    with structlog.testing.capture_logs() as logs:
        _, body = await system.graphql(
            system.admin,
            f"""mutation {{ createCronWebhook(input: {{url: "https://a.example/",
            cronSchedule: "* * * * *", secret: "{secret}", catchUpPolicy: SOMETIMES}})
            {{ secret }} }}""",
        )
        assert body["errors"][0]["extensions"]["field"] == "catchUpPolicy"
        # graphql-core quotes the whole input in this one: the answer may, the logs may not
        _, body = await system.graphql(
            system.admin,
            f"""mutation {{ createCronWebhook(input: {{url: "https://a.example/",
            secret: "{secret}"}}) {{ secret }} }}""",
        )
        assert body["errors"][0]["extensions"]["field"] == "cronSchedule"
    assert secret not in json.dumps(logs, default=str)
    assert any(entry.get("event") == "graphql_error" for entry in logs)


async def test_introspection_and_the_explorer_page(system: System) -> None:
    _, body = await system.graphql(
        system.admin, "{ __schema { queryType { name } mutationType { name } } }"
    )
    assert body["data"]["__schema"] == {
        "queryType": {"name": "Query"},
        "mutationType": {"name": "Mutation"},
    }
    _, body = await system.graphql(
        system.admin, '{ __type(name: "CronWebhook") { fields { name } } }'
    )
    names = {f["name"] for f in body["data"]["__type"]["fields"]}
    assert {
        "nextRuns",
        "stats",
        "consecutiveFailures",
        "disabledReason",
        "timezone",
        "hasSecret",
    } <= names
    assert "secret" not in names
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.get(system.urls["admin-api"] + "/graphql") as resp,
    ):
        assert resp.status == 200 and "graphiql" in (await resp.text()).lower()


async def test_mutations_record_the_acting_admin(system: System) -> None:
    _, body = await system.graphql(system.admin, CREATE_WEBHOOK_IN_FULL, {"input": webhook_input()})
    hook_id = body["data"]["createCronWebhook"]["cronWebhook"]["id"]
    await system.graphql(system.admin, f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ id }} }}")
    conn = await asyncpg.connect(system.dsn)
    try:
        actors = {r["actor"] for r in await conn.fetch("select actor from eventstore.events")}
        row = await conn.fetchrow("select created_by, disabled_by from admin.webhooks")
    finally:
        await conn.close()
    assert len(actors) == 1 and next(iter(actors)).startswith("admin:")
    assert row["created_by"] == row["disabled_by"] == next(iter(actors))
