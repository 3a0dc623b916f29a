"""What a costed list field asks for (`nextRuns(count: Int = 5)`), and the budget that
holds it at run time.

What a list field multiplies is known only once it runs (`cronWebhooks { nextRuns }` is
as large as the webhook list), so costed fields are checked twice: statically, from the
document and the variables (`list_cost`, summed over every alias and fragment use by
graphql_shape.measure), and at run time by a per-request `Budget` that the field's
resolver charges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    IntValueNode,
    OperationDefinitionNode,
    VariableNode,
)

from cronhooks_common.graphql_shape import FieldCost, too_complex


@dataclass(frozen=True, slots=True)
class ListCost:
    """A field whose answer holds as many values as one of its arguments says
    (`nextRuns(count: Int = 5)`), and how many of them one request may ask for in all."""

    field: str
    argument: str
    default: int
    maximum: int  # a larger value is refused by the resolver: it produces nothing
    limit: int
    noun: str  # "nextRuns values", for the message

    def refusal(self) -> GraphQLError:
        """The QUERY_TOO_COMPLEX error for a request past `limit`."""
        return too_complex(f"the request asks for more than {self.limit:,} {self.noun} in all")


class Budget:
    """What one request may still produce of a `ListCost` field; its resolver charges it
    before computing, so list fields cannot multiply the static count past the limit."""

    def __init__(self, cost: ListCost) -> None:
        self.cost = cost
        self.spent = 0
        self.refused = False

    def charge(self, values: int) -> None:
        """Spend `values`, or refuse (QUERY_TOO_COMPLEX) if that goes past the limit."""
        if self.spent + values > self.cost.limit:
            self.refused = True
            raise self.cost.refusal()
        self.spent += values


def _variable_defaults(document: DocumentNode) -> dict[str, int]:
    """Default values of the document's Int variables that have a literal default."""
    defaults: dict[str, int] = {}
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            for variable in definition.variable_definitions or ():
                default = variable.default_value
                if isinstance(default, IntValueNode):
                    defaults.setdefault(variable.variable.name.value, int(default.value))
    return defaults


def list_cost(cost: ListCost, document: DocumentNode, variables: Mapping[str, Any]) -> FieldCost:
    """How many values one selection of `cost.field` asks for: the argument's literal, or
    its variable's value (or the variable's default), or the argument's default. A value
    the resolver refuses (not an integer from 0 to `cost.maximum`) produces nothing."""
    defaults = _variable_defaults(document)

    def argument_value(node: FieldNode) -> Any:
        for argument in node.arguments or ():
            if argument.name.value == cost.argument:
                value = argument.value
                if isinstance(value, IntValueNode):
                    return int(value.value)
                if isinstance(value, VariableNode):
                    name = value.name.value
                    if name in variables:
                        return variables[name]
                    return defaults.get(name, cost.default)
                return None  # null or a wrong type: refused before or by the resolver
        return cost.default

    def cost_of(node: FieldNode) -> int:
        if node.name.value != cost.field:
            return 0
        value = argument_value(node)
        valid = isinstance(value, int) and not isinstance(value, bool)
        return value if valid and 0 <= value <= cost.maximum else 0

    return cost_of
