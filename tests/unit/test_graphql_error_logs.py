"""How GraphQL errors are logged (graphql_support.format_error): refused input at
`warning` with field and reason and no traceback, an unexpected exception at `error` with
its traceback, and graphql-core's own refusals with a reason that quotes no literal."""

from __future__ import annotations

from typing import Any

from ariadne import QueryType, graphql, make_executable_schema
from structlog.testing import capture_logs

from cronhooks_common.graphql_support import bad_input, format_error, silence_ariadne_logger

SDL = """
type Query { cron(schedule: String!): String  broken: String  hook(id: Int!): String }
input In { secret: String! }
type Mutation { make(input: In!): String }
"""
query = QueryType()


@query.field("cron")
def resolve_cron(*_: Any, schedule: str) -> str:
    raise bad_input("schedule", "minute field: 61 is outside 0-59")


@query.field("broken")
def resolve_broken(*_: Any) -> str:
    raise RuntimeError("a bug")


SCHEMA = make_executable_schema(SDL, query)


async def logged(source: str) -> list[dict[str, Any]]:
    with capture_logs() as logs:
        await graphql(
            SCHEMA,
            {"query": source},
            error_formatter=format_error,
            logger=silence_ariadne_logger(),
        )
    return logs


async def test_bad_input_is_a_warning_with_field_and_reason() -> None:
    [line] = await logged('{ cron(schedule: "61 * * * *") }')
    assert line["log_level"] == "warning" and line["event"] == "graphql_error"
    assert line["field"] == "schedule" and line["reason"] == "minute field: 61 is outside 0-59"
    assert "exc_info" not in line


async def test_an_unexpected_exception_is_an_error_with_its_traceback() -> None:
    [line] = await logged("{ broken }")
    assert line["log_level"] == "error" and isinstance(line["exc_info"], RuntimeError)


async def test_graphql_own_refusal_names_the_field_and_quotes_nothing() -> None:
    secret = "an inline secret 0123456789"
    # graphql-core's message for this one quotes the whole input literal
    [line] = await logged(f'mutation {{ make(input: {{secret: "s", other: "{secret}"}}) }}')
    assert line["log_level"] == "warning" and line["code"] == "BAD_USER_INPUT"
    assert (line["field"], line["reason"]) == ("other", "is not a known field")
    assert secret not in str(line)
