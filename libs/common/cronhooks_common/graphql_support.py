"""What both GraphQL APIs (admin-api's and the importer's agent API) share: the DateTime
scalar and the error formatter that gives GraphQL's own input errors a code and a field.

GraphQL itself refuses some bad input before any resolver runs: an unknown enum value, a
wrong type, a missing required field, in a literal or in a variable. graphql-core reports
those as bare messages; clients of cronhooks get `extensions.code = "BAD_USER_INPUT"` and
`extensions.field` naming the input field, exactly as for the errors the resolvers raise.
graphql-core has no structured form of these errors: the field comes from the message
(variables: "has invalid value at .catchUpPolicy") or, for literals, from where the error
points in the document (the argument or input field whose value holds that position).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

import structlog
from ariadne import ScalarType
from graphql import (
    ArgumentNode,
    DocumentNode,
    GraphQLError,
    ObjectFieldNode,
    Visitor,
    visit,
)

from cronhooks_common.clock import iso
from cronhooks_common.refusals import log_refused

log = structlog.get_logger(__name__)

BAD_USER_INPUT = "BAD_USER_INPUT"
INVALID_VALUE = "has an invalid value"

# Ariadne logs every error at `error` with its traceback, bad input included, and with the
# message that may quote the request's literals (a secret among them). Its logger is
# silenced; `format_error` logs each error once, as what it is.
ARIADNE_LOGGER = "cronhooks.graphql.ariadne"


def silence_ariadne_logger() -> str:
    """The logger name to pass to ariadne's `graphql(logger=...)`: it logs nowhere."""
    quiet = logging.getLogger(ARIADNE_LOGGER)
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return ARIADNE_LOGGER

datetime_scalar = ScalarType("DateTime")


@datetime_scalar.serializer
def serialize_datetime(value: datetime) -> str:
    return iso(value)


@datetime_scalar.value_parser
def parse_datetime(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("expected an ISO 8601 date-time string")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("expected an ISO 8601 date-time with a UTC offset")
    return moment


def bad_input(field: str, reason: str) -> GraphQLError:
    return GraphQLError(f"{field}: {reason}", extensions={"code": BAD_USER_INPUT, "field": field})


# Messages of graphql-core 3.3 that name the input field themselves (first match wins),
# with the reason logged for each: the message itself may quote the request's literals.
_NAMED = (
    (re.compile(r"to include required field '(\w+)'"), "is required"),
    (re.compile(r"not to include unknown field '(\w+)'"), "is not a known field"),
    (re.compile(r"^Argument '[\w.]+\((\w+):\)' of type .* is required"), "is required"),
    (re.compile(r"^Unknown argument '(\w+)' on field"), "is not a known argument"),
    (re.compile(r"^Variable '\$\w+' has invalid value at \.([\w.\[\]]+):"), INVALID_VALUE),
    (re.compile(r"^Variable '\$(\w+)' has invalid value"), INVALID_VALUE),
)


def _last_name(path: str) -> str:
    """`input.readPatterns[1]` → `readPatterns`."""
    return re.sub(r"\[\d+\]", "", path).split(".")[-1]


class _ValueOwners(Visitor):
    """Collects (start, end, name) of every argument and input-object field value."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[tuple[int, int, str]] = []

    def enter_argument(self, node: ArgumentNode, *_: Any) -> None:
        self._add(node)

    def enter_object_field(self, node: ObjectFieldNode, *_: Any) -> None:
        self._add(node)

    def _add(self, node: ArgumentNode | ObjectFieldNode) -> None:
        if node.value.loc is not None:
            self.spans.append((node.value.loc.start, node.value.loc.end, node.name.value))


def _owner_at(document: DocumentNode, position: int) -> str | None:
    """The innermost argument or input field whose value contains `position`."""
    owners = _ValueOwners()
    visit(document, owners)
    inside = [(end - start, name) for start, end, name in owners.spans if start <= position < end]
    return min(inside)[1] if inside else None


def input_field_of(error: GraphQLError, document: DocumentNode | None) -> str | None:
    """The input field a GraphQL validation or coercion error is about, if it is one."""
    for pattern, _ in _NAMED:
        match = pattern.search(error.message)
        if match:
            return _last_name(match.group(1))
    if document is not None and error.positions:
        return _owner_at(document, next(iter(error.positions)))
    return None


def format_error(
    error: GraphQLError, debug: bool = False, *, document: DocumentNode | None = None
) -> dict[str, Any]:
    """Ariadne's `error_formatter`: every error leaves with an `extensions.code`."""
    formatted: dict[str, Any] = dict(error.formatted)
    extensions = dict(formatted.get("extensions") or {})
    ours = "code" in extensions  # raised by a resolver or a limit, with a message of ours
    if not ours:
        if error.path is None:  # before execution: syntax, validation, variable coercion
            field = input_field_of(error, document)
            if field is not None:
                extensions.update(code=BAD_USER_INPUT, field=field)
            elif error.message.startswith("Syntax Error"):
                extensions["code"] = "GRAPHQL_PARSE_FAILED"
            else:
                extensions["code"] = "GRAPHQL_VALIDATION_FAILED"
        elif error.original_error is not None and not isinstance(
            error.original_error, GraphQLError
        ):
            # An unexpected exception in a resolver: its text is for the logs, not clients.
            log.error("graphql_internal_error", path=error.path, exc_info=error.original_error)
            formatted["message"] = "internal error"
            extensions["code"] = "INTERNAL_SERVER_ERROR"
    if extensions.get("code") != "INTERNAL_SERVER_ERROR":
        field = extensions.get("field") or _arguments_of(error)
        log_refused(
            "graphql_error",
            field=field,
            reason=_reason(error, field) if ours else _core_reason(error, extensions["code"]),
            code=extensions.get("code"),
            path=".".join(map(str, error.path)) if error.path else None,
        )
    formatted["extensions"] = extensions
    return formatted


def _arguments_of(error: GraphQLError) -> str | None:
    """The arguments of the field an error is about (`deleteCronWebhook(id: 7)` → `id`):
    the input a NOT_FOUND or CONFLICT is about names no field of its own."""
    node = error.nodes[0] if error.nodes else None
    names = [a.name.value for a in getattr(node, "arguments", None) or ()]
    return ", ".join(names) or None


def _reason(error: GraphQLError, field: str | None) -> str:
    """Our own message, without the `field: ` it starts with when it is bad input."""
    return error.message.removeprefix(f"{field}: ") if field else error.message


def _core_reason(error: GraphQLError, code: str) -> str:
    """A reason for graphql-core's own errors that quotes nothing of the request."""
    where = ", ".join(f"line {loc.line} column {loc.column}" for loc in error.locations or ())
    if code == BAD_USER_INPUT:
        if "was not provided" in error.message:
            return "is required"
        named = (reason for pattern, reason in _NAMED if pattern.search(error.message))
        return next(named, INVALID_VALUE)
    what = "syntax error" if code == "GRAPHQL_PARSE_FAILED" else "invalid query"
    return f"{what} at {where}" if where else what
