"""The errors of admin-api's commands, which each entry point answers in its own terms:
GraphQL (graphql/errors.py) as BAD_USER_INPUT, NOT_FOUND, CONFLICT or PAUSED; the agent-cron API
and the debug endpoints as HTTP 400 or 404."""

from __future__ import annotations


class InputError(ValueError):
    """Input that cannot be taken, naming the field as the client sent it (GraphQL input
    field or request parameter): BAD_USER_INPUT with `extensions.field`."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class NotFound(LookupError):
    def __init__(self, what: str, ident: int) -> None:
        super().__init__(f"{what} {ident} not found")


class Conflict(Exception):
    """The command cannot be answered as asked: the state moved on (GraphQL CONFLICT)."""


class Paused(Exception):
    """Deliveries are paused (CONTRACT §16.4): a manual delivery is refused (GraphQL
    PAUSED)."""

    def __init__(self) -> None:
        super().__init__("deliveries are paused (resumeDeliveries ends the pause)")
