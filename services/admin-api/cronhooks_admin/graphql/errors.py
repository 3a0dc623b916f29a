"""How the command side's errors (cronhooks_admin.errors) are answered in GraphQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from graphql import GraphQLError

from cronhooks_admin.errors import Conflict, InputError, NotFound, Paused
from cronhooks_common.eventstore import ConcurrencyError
from cronhooks_common.graphql_support import bad_input

T = TypeVar("T")


def not_found(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "NOT_FOUND"})


async def run_command(run: Callable[[], Awaitable[T]]) -> T:
    """Run a command, mapping domain errors to GraphQL errors; retry lost races."""
    for _ in range(5):
        try:
            return await run()
        except InputError as exc:
            raise bad_input(exc.field, exc.reason) from None
        except NotFound as exc:
            raise not_found(str(exc)) from None
        except Conflict as exc:
            raise GraphQLError(str(exc), extensions={"code": "CONFLICT"}) from None
        except Paused as exc:
            raise GraphQLError(str(exc), extensions={"code": "PAUSED"}) from None
        except ConcurrencyError:
            continue  # another command changed the webhook meanwhile: decide again
    raise GraphQLError(
        "the webhook is being changed concurrently; try again", extensions={"code": "CONFLICT"}
    )
