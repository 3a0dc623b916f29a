"""Deeply nested and absurd input (CONTRACT §15, "Bad input is never a 500"): every
endpoint that reads a body or a parameter refuses it with a 4xx naming the body or the
field (a GraphQL error naming it, for what GraphQL refuses while running) — never a 500,
never a dropped connection — and writes nothing.

The finding this closes: `[`×30,000 + `]`×30,000 with valid credentials was a 500
(RecursionError) on admin /graphql, importer POST /api/notes and /graphql, and
/api/agent-cron/provision and /cancel.

Each test boots admin-api and the importer once (dev mode: the debug endpoints too) and
sends all its cases to them, so a case costs a request, not a database."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import asyncpg
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronhooks_common.graphql_limits import MAX_TOKENS
from cronhooks_common.http_limits import (
    AGENT_CRON_BODY_BYTES,
    GRAPHQL_BODY_BYTES,
    TOKEN_API_BODY_BYTES,
)
from cronhooks_common.json_input import MAX_NESTING
from tests.support.flows import create_agent
from tests.support.system import System
from tests.support.token_api import mint

TOO_DEEP = "request body nested deeper than 64 levels"
LITERAL_TOO_DEEP = "a value in the query is nested more than 64 levels deep"
FIRE_AT = "2030-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class Endpoint:
    """One endpoint that reads a JSON body: `template` holds VALUE where a nested value
    goes, inside `outer` levels of its own, so the whole body nests `outer` + the value's
    levels. At 64 levels in all, each template is answered as usual (not refused for it)."""

    name: str
    service: str
    path: str
    credential: str  # "admin", "agent" or "api": which token of the Sender it takes
    graphql: bool  # refuses with {"errors": [{"message", "extensions"}]}; else {"error"}
    limit: int  # of the body's size, in bytes
    template: bytes
    outer: int

    def body(self, value: bytes) -> bytes:
        return self.template.replace(b"VALUE", value)

    def message(self, answer: Any) -> str:
        if not isinstance(answer, dict):
            return repr(answer)
        if self.graphql:
            return str((answer.get("errors") or [{}])[0].get("message"))
        return str(answer.get("error"))


# Variables the operation does not declare are ignored: the GraphQL endpoints answer 200.
UNDECLARED_VARIABLE = b'{"query": "{ __typename }", "variables": {"v": VALUE}}'
ENDPOINTS = [
    Endpoint(
        "admin /graphql", "admin-api", "/graphql", "admin", True, GRAPHQL_BODY_BYTES,
        UNDECLARED_VARIABLE, 2,
    ),
    Endpoint(
        "importer /graphql", "importer", "/graphql", "api", True, TOKEN_API_BODY_BYTES,
        UNDECLARED_VARIABLE, 2,
    ),
    Endpoint(
        "provision", "admin-api", "/api/agent-cron/provision", "agent", False,
        AGENT_CRON_BODY_BYTES, b'{"job_id": "j", "fire_at": "%s", "dedup_key": VALUE}' % FIRE_AT.encode(), 1,
    ),
    Endpoint(
        "cancel", "admin-api", "/api/agent-cron/cancel", "agent", False, AGENT_CRON_BODY_BYTES,
        b'{"job_id": VALUE}', 1,
    ),
    Endpoint(
        "POST /api/notes", "importer", "/api/notes", "api", False, TOKEN_API_BODY_BYTES,
        b'{"changes": [], "x": VALUE}', 1,
    ),
]  # fmt: skip


@dataclass
class Sender:
    """Sends to the running services as one of their credentials."""

    system: System
    tokens: dict[str, str]  # "admin", "agent" and "api"

    async def send(
        self,
        method: str,
        service: str,
        path: str,
        credential: str | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, Any]:
        """The status and the answer (JSON if it is); a dropped connection fails the test."""
        headers = {"Content-Type": "application/json"}
        if credential:
            headers["Authorization"] = f"Bearer {self.tokens[credential]}"
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method, self.system.urls[service] + path, data=raw, headers=headers
            ) as resp,
        ):
            raw = await resp.read()
        try:
            return resp.status, json.loads(raw)
        except (ValueError, RecursionError):  # a 500's text, or a deep body echoed
            return resp.status, raw.decode(errors="replace")

    async def post(self, endpoint: Endpoint, raw: bytes) -> tuple[int, Any]:
        return await self.send("POST", endpoint.service, endpoint.path, endpoint.credential, raw)

    async def graphql(self, service: str, query: str, variables: Any = None) -> tuple[int, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        return await self.send(
            "POST", service, "/graphql", "admin" if service == "admin-api" else "api", body
        )

    async def events(self, *, verdicts: bool = True) -> int:
        """Events in the store; without `verdicts`, those other than the `notes.rejected`
        verdict a refused batch of changes closes with (CONTRACT §5: nothing is written)."""
        query = "select count(*) from eventstore.events"
        if not verdicts:
            query += " where type <> 'notes.rejected'"
        conn = await asyncpg.connect(self.system.dsn)
        try:
            return int(await conn.fetchval(query))
        finally:
            await conn.close()


pytestmark = pytest.mark.system(
    services=("admin-api", "importer"), settings={"dev_mode": True}, open_webhook=True
)


@pytest.fixture
async def sender(system: System) -> Sender:
    agent, _ = await create_agent(system, system.admin, "https://agent.example/", "nesting")
    api = mint(system.settings, write=["fuzz/*"])  # of the open webhook: tokens need a live one
    return Sender(system, {"admin": system.admin, "agent": agent, "api": api})


def arrays(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def objects(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def mixed(levels: int) -> bytes:
    """[{"a": [{"a": … 1 …}]}]: arrays and objects by turns, each a level."""
    opens = [b"[", b'{"a":'] * (levels // 2) + [b"["] * (levels % 2)
    closes = {b"[": b"]", b'{"a":': b"}"}
    inner = b'"x"' if levels % 2 == 0 else b"1"
    return b"".join(opens) + inner + b"".join(closes[o] for o in reversed(opens))


def refused_as_too_deep(endpoint: Endpoint, status: int, answer: Any) -> bool:
    """The endpoint's own shape of the refusal, naming the body."""
    if status != 400 or endpoint.message(answer) != TOO_DEEP:
        return False
    if endpoint.graphql:
        extensions = answer["errors"][0]["extensions"]
        return bool(extensions == {"code": "BAD_REQUEST", "field": "body"})
    if endpoint.service == "admin-api":  # agent-cron answers name the field
        return bool(answer.get("field") == "body")
    return True


async def test_the_finding_30000_brackets_are_a_named_400_not_a_500(sender: Sender) -> None:
    """The reproduction: `[`×30,000 + `]`×30,000 as the body, with valid credentials."""
    before = await sender.events()
    answers = {}
    with structlog.testing.capture_logs() as logs:
        for endpoint in ENDPOINTS:
            status, answer = await sender.post(endpoint, arrays(30_000))
            answers[endpoint.name] = (status, endpoint.message(answer) if status == 400 else answer)
            assert refused_as_too_deep(endpoint, status, answer), (endpoint.name, answer)
    assert answers == {e.name: (400, TOO_DEEP) for e in ENDPOINTS}
    assert await sender.events() == before
    refused = [e for e in logs if e.get("field") == "body" and e.get("reason") == TOO_DEEP]
    assert len(refused) == len(ENDPOINTS), logs  # one warning line each, no traceback
    assert not [e for e in logs if e["log_level"] in ("error", "critical")], logs


@pytest.mark.parametrize("shape", [arrays, objects, mixed])
async def test_64_levels_pass_the_bound_and_65_500_and_30000_are_refused_by_name(
    sender: Sender, shape: Callable[[int], bytes]
) -> None:
    """The outermost array or object is level 1, whatever the shape and wherever the deep
    part sits in the body (here inside the endpoint's own object)."""
    for endpoint in ENDPOINTS:
        body = endpoint.body(shape(MAX_NESTING - endpoint.outer))
        status, answer = await sender.post(endpoint, body)
        assert status < 500 and TOO_DEEP not in json.dumps(answer), (endpoint.name, answer)
        if endpoint.graphql:  # the undeclared variable was read and ignored
            assert status == 200 and answer["data"] == {"__typename": "Query"}, answer
        before = await sender.events()
        for levels in (MAX_NESTING + 1, 500, 30_000):
            body = endpoint.body(shape(levels - endpoint.outer))
            status, answer = await sender.post(endpoint, body)
            if len(body) > endpoint.limit:  # 30,000 objects for agent-cron: size comes first
                assert status == 413, (endpoint.name, levels, answer)
                continue
            assert refused_as_too_deep(endpoint, status, answer), (endpoint.name, levels, answer)
        assert await sender.events() == before, endpoint.name


# A nest of the given kinds, outermost first, with scalars (and, above the innermost
# level, shallow containers) beside each level: its depth is exactly len(kinds).
kinds = st.lists(st.sampled_from(["array", "object"]), min_size=MAX_NESTING - 6, max_size=70)
scalars = st.one_of(st.integers(), st.floats(), st.text(max_size=5), st.none(), st.booleans())
siblings = st.lists(st.one_of(scalars, st.just([]), st.just({"k": 1})), max_size=2)


@st.composite
def nests(draw: st.DrawFn) -> tuple[Any, int]:
    levels = draw(kinds)
    value: Any = draw(scalars)
    for index, kind in enumerate(reversed(levels)):
        beside = draw(st.lists(scalars, max_size=2) if index == 0 else siblings)
        value = (
            [*beside, value]
            if kind == "array"
            else {**{str(i): v for i, v in enumerate(beside)}, "n": value}
        )
    return value, len(levels)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(nest=nests(), which=st.integers(0, len(ENDPOINTS) - 1))
async def test_any_shape_is_refused_exactly_past_64_levels(sender: Sender, nest, which) -> None:  # type: ignore[no-untyped-def]
    value, levels = nest
    endpoint = ENDPOINTS[which]
    status, answer = await sender.post(endpoint, endpoint.body(json.dumps(value).encode()))
    assert status < 500, answer
    too_deep = refused_as_too_deep(endpoint, status, answer)
    assert too_deep == (levels + endpoint.outer > MAX_NESTING), (levels, endpoint.name, answer)


# --- GraphQL documents: literals nested in the query text -------------------------------


def literal(levels: int, kind: str) -> str:
    if kind == "list":
        return "[" * levels + '"a"' + "]" * levels
    return "{a: " * levels + '"a"' + "}" * levels


# (query with VALUE where the literal goes, the list and object levels around it)
GRAPHQL_LITERALS = {
    "admin-api": [
        ("{ notes(pattern: VALUE) { path } }", 0),
        ("{ notes(limit: VALUE) { path } }", 0),
        ('mutation { createApiKey(input: {name: "k", skipWebhooks: VALUE}) { key } }', 1),
        (
            'mutation { createCronWebhook(input: {url: "https://agent.example/",'
            ' cronSchedule: "@daily", readPatterns: VALUE}) { secret } }',
            1,
        ),
        ("query($p: String = VALUE) { notes(pattern: $p) { path } }", 0),
        ("{ __typename @include(if: VALUE) }", 0),
    ],
    "importer": [
        ("{ notePaths(pattern: VALUE) { path } }", 0),
        (
            'mutation { pushNotes(input: {updates: [{path: VALUE, content: "x"}]}) { __typename } }',
            3,
        ),
        ("mutation { hideNotes(input: {paths: VALUE}) { __typename } }", 1),
    ],
}


@pytest.mark.parametrize("service", ["admin-api", "importer"])
async def test_deep_graphql_literals_are_refused_by_name_before_validation(
    sender: Sender, service: str
) -> None:
    """Argument values, input objects, variable defaults and directive arguments nested up
    to 64 levels reach validation (an ordinary GraphQL error); deeper, up to the token
    limit, the query is QUERY_TOO_COMPLEX naming the 64 levels — never a RecursionError."""
    before = await sender.events()
    for template, outer in GRAPHQL_LITERALS[service]:
        for kind, most in (("list", 4_990), ("object", 2_490)):  # ~10,000 tokens
            for levels in (MAX_NESTING, MAX_NESTING + 1, 150, 199, 200, 1_000, most):
                query = template.replace("VALUE", literal(levels - outer, kind))
                status, answer = await sender.graphql(service, query)
                case = (template, kind, levels)
                assert status == 400 and "data" not in answer, (case, answer)
                error = answer["errors"][0]
                if levels <= MAX_NESTING:
                    assert error["extensions"]["code"] != "QUERY_TOO_COMPLEX", (case, error)
                    continue
                assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX", (case, error)
                if levels < 180:  # within what graphql-core's parser takes: just the values
                    assert error["message"] == LITERAL_TOO_DEEP, (case, error)
                else:
                    assert "64 levels" in error["message"], (case, error)
    assert MAX_TOKENS // 2 > 4 * 2_490  # the deepest are well within the token limit
    assert await sender.events() == before


@pytest.mark.parametrize("service", ["admin-api", "importer"])
async def test_deep_variable_types_are_graphql_errors(sender: Sender, service: str) -> None:
    """`$v: [[[…String…]]]`: a type no argument takes, refused by validation at any depth
    graphql-core's parser takes (200 levels); beyond, QUERY_TOO_COMPLEX."""
    field = "notes" if service == "admin-api" else "notePaths"
    for levels in (MAX_NESTING + 1, 199, 1_000):
        type_ = "[" * levels + "String" + "]" * levels
        status, answer = await sender.graphql(
            service, f"query($v: {type_}) {{ {field}(pattern: $v) {{ path }} }}"
        )
        assert status == 400, answer
        code = answer["errors"][0]["extensions"]["code"]
        assert code in ("GRAPHQL_VALIDATION_FAILED", "QUERY_TOO_COMPLEX"), answer


# --- absurd values --------------------------------------------------------------------------

# JSON texts of values that no field below takes.
ABSURD = {
    "5,000 digits": "1" + "0" * 5000,
    "-5,000 digits": "-1" + "0" * 4999,
    "5,000-digit fraction": "0." + "1" * 5000,
    "1e999": "1e999",
    "-1e999": "-1e999",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "-0": "-0",
    "-0.0": "-0.0",
    "lone surrogate": '"\\ud800"',
    "lone low surrogate": '"x\\udfffy"',
    "NUL": '"a\\u0000b"',
    "empty key": '{"": 1}',
    "empty keys nested": '{"": {"": {"": []}}}',
    "100,000 scalars": "[" + ",".join(["0"] * 100_000) + "]",
    "20,000 NUL strings": "[" + ",".join(['"\\u0000"'] * 20_000) + "]",
}


@dataclass(frozen=True)
class Placement:
    """Where an endpoint gets an absurd value, and the names its refusal may give."""

    endpoint: Endpoint
    template: bytes  # VALUE where the value goes
    fields: tuple[str, ...]

    def body(self, value: str) -> bytes:
        return self.template.replace(b"VALUE", value.encode())


ADMIN, IMPORTER, PROVISION, CANCEL, NOTES = ENDPOINTS
PLACEMENTS = [
    Placement(
        ADMIN,
        b'{"query": "query($n: String!) { notes(pattern: $n) { path } }", "variables": {"n": VALUE}}',
        ("n", "pattern"),
    ),
    Placement(
        ADMIN,
        b'{"query": "query($l: Int) { notes(limit: $l) { path } }", "variables": {"l": VALUE}}',
        ("l", "limit"),
    ),
    Placement(
        ADMIN,
        b'{"query": "mutation($i: CreateApiKeyInput!) { createApiKey(input: $i) { key } }",'
        b' "variables": {"i": {"name": VALUE}}}',
        ("name", "i"),
    ),
    Placement(
        IMPORTER,
        b'{"query": "mutation($u: [PushNoteInput!]!) { pushNotes(input: {updates: $u})'
        b' { __typename ... on ErrorPayload { errors { path error } } } }",'
        b' "variables": {"u": [{"path": "fuzz/a", "content": VALUE}]}}',
        ("u", "content"),
    ),
    Placement(
        IMPORTER,
        b'{"query": "query($p: String) { notePaths(pattern: $p) { path } }", "variables": {"p": VALUE}}',
        ("p", "pattern"),
    ),
    Placement(PROVISION, b'{"job_id": VALUE, "fire_at": "' + FIRE_AT.encode() + b'"}', ("job_id",)),
    Placement(PROVISION, b'{"job_id": "j", "fire_at": VALUE}', ("fire_at",)),
    Placement(
        PROVISION,
        b'{"job_id": "j", "fire_at": "' + FIRE_AT.encode() + b'", "agent_callback_url": VALUE}',
        ("agent_callback_url",),
    ),
    Placement(CANCEL, b'{"job_id": VALUE}', ("job_id",)),
    Placement(NOTES, b'{"changes": [{"path": "fuzz/a", "content": VALUE}]}', ("content",)),
    Placement(NOTES, b'{"changes": [{"path": VALUE, "content": "x"}]}', ("path",)),
    Placement(
        NOTES,
        b'{"changes": [{"path": "fuzz/a", "content": "x", "expected_hash": VALUE}]}',
        ("expected_hash",),
    ),
    Placement(NOTES, b'{"changes": VALUE}', ("changes",)),
]


def names_the_field_or_body(placement: Placement, status: int, answer: Any) -> bool:
    """A 4xx (a GraphQL error at 200 for what GraphQL refuses at run time) whose answer
    names one of the placement's fields, or the body."""
    if not isinstance(answer, dict) or status >= 500:
        return False
    if placement.endpoint.graphql:
        if status not in (200, 400):
            return False
        if "errors" not in answer:  # an ErrorPayload: the rule that refused names the field
            payload = next(iter(answer["data"].values()))
            error = payload["errors"][0]["error"] if payload.get("errors") else ""
            return any(field in error for field in placement.fields)
        first = answer["errors"][0]
        field = first.get("extensions", {}).get("field")
        return field in (*placement.fields, "body") or "request body" in first["message"]
    if not 400 <= status < 500:
        return False
    if answer.get("field") is not None:
        return answer["field"] in (*placement.fields, "body")
    return any(name in answer["error"] for name in (*placement.fields, "request body"))


async def test_absurd_values_are_a_named_4xx_and_write_nothing(sender: Sender) -> None:
    before = await sender.events(verdicts=False)
    unnamed = []
    for name, value in ABSURD.items():
        for placement in PLACEMENTS:
            status, answer = await sender.post(placement.endpoint, placement.body(value))
            if not names_the_field_or_body(placement, status, answer):
                unnamed.append((name, placement.endpoint.name, placement.fields, status, answer))
    assert not unnamed, "\n".join(repr(u)[:300] for u in unnamed)
    assert await sender.events(verdicts=False) == before


async def test_absurd_bodies_whole_are_refused_naming_the_body(sender: Sender) -> None:
    """Not an object at all, or an object of nothing the endpoint knows."""
    before = await sender.events(verdicts=False)
    for name, value in {**ABSURD, "empty object": "{}", "null": "null"}.items():
        for endpoint in ENDPOINTS:
            status, answer = await sender.post(endpoint, value.encode())
            assert 400 <= status < 500, (name, endpoint.name, status, answer)
            message = endpoint.message(answer)
            assert any(n in message for n in ("body", "changes", "job_id", "query")), (
                name,
                endpoint.name,
                answer,
            )
    assert await sender.events(verdicts=False) == before


# Query parameters: text, not JSON, but absurd all the same.
ABSURD_TEXT = [
    "1" + "0" * 5000,
    "1e999",
    "NaN",
    "-0",
    "%00",
    "%ED%A0%80",  # a lone surrogate, as UTF-8 would have it
    "%FF%FE",
    "[" * 500,
    "[!" * 250,
    "*" * 500,
    "%5B" * 2000,
    "",
]


async def test_absurd_query_parameters_of_the_token_api(sender: Sender) -> None:
    before = await sender.events(verdicts=False)
    for text in ABSURD_TEXT:
        status, answer = await sender.send("GET", "importer", f"/api/notes?pattern={text}", "api")
        assert status in (200, 400), (text[:40], status, answer)
        if status == 400:
            assert answer["error"].startswith("pattern: "), answer
        status, answer = await sender.send(
            "DELETE", "importer", f"/api/notes/fuzz/a?expected_hash={text}", "api"
        )
        assert status in (400, 404), (text[:40], status, answer)
        assert "expected_hash" in answer["error"] or "no note" in answer["error"], answer
        status, answer = await sender.send("DELETE", "importer", f"/api/notes/{text}x", "api")
        assert status in (400, 403, 404), (text[:40], status, answer)
    assert await sender.events(verdicts=False) == before


# --- the dev-mode debug endpoints ----------------------------------------------------------


async def test_debug_endpoints_take_deep_and_absurd_input_without_a_500(sender: Sender) -> None:
    """The sink records any body and lists it (one nested past 64 levels as its text);
    its parameters of thousands of digits are refused by name."""
    digits = "1" + "0" * 5000
    bodies = [arrays(65), arrays(1_000), arrays(30_000), *(v.encode() for v in ABSURD.values())]
    for raw in bodies:
        status, _ = await sender.send("POST", "admin-api", "/debug/test_webhook", raw=raw)
        assert status == 200
    status, listed = await sender.send("GET", "admin-api", "/debug/test_webhook_calls")
    assert status == 200, listed
    shown = [call["body"] for call in listed["calls"][: len(bodies)]]
    assert shown[:3] == [arrays(65).decode(), arrays(1_000).decode(), arrays(30_000).decode()]
    deep_told = quote(arrays(1_000).decode())
    status, told = await sender.send("POST", "admin-api", f"/debug/test_webhook?body={deep_told}")
    assert status == 200 and told == arrays(1_000).decode()  # answered as told, unparsed
    for path, field in (
        (f"/debug/test_webhook?status={digits}", "status"),
        (f"/debug/test_webhook?delay={digits}s", "delay"),
        (f"/debug/test_webhook_calls?last={digits}", "last"),
        (f"/debug/run_cron_job?id={digits}", "id"),
        ("/debug/run_cron_job?id=1e999", "id"),
        ("/debug/run_cron_job?id=-0", "id"),
        ("/debug/run_cron_job?id=%ED%A0%80", "id"),
    ):
        method = "GET" if "calls" in path else "POST"
        status, answer = await sender.send(method, "admin-api", path)
        assert (status, answer.get("field")) == (400, field), (path[:40], status, answer)
