"""How deep and how large a GraphQL document is, and the refusal when it is too much.

A request may hold at most MAX_DEPTH levels and MAX_FIELDS fields and aliases (CONTRACT
§15); past either it is refused with `extensions.code = "QUERY_TOO_COMPLEX"` and a message
naming the limit. The same walk adds up what costed list fields ask for (graphql_costs.py).

Counting: a fragment counts once per spread (its sizes are memoised, so a fragment spread
a thousand times is measured once); a fragment cycle counts nothing (validation reports
it); a fragment no operation reaches counts once (validation still walks it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)

QUERY_TOO_COMPLEX = "QUERY_TOO_COMPLEX"
MAX_DEPTH = 15
MAX_FIELDS = 2000
# Spreads inside fragments inside fragments…: no real query nests them this deep, and the
# measuring below recurses through them.
MAX_FRAGMENT_NESTING = 50


def too_complex(message: str) -> GraphQLError:
    """The QUERY_TOO_COMPLEX error; `message` names the limit the request went past."""
    return GraphQLError(message, extensions={"code": QUERY_TOO_COMPLEX})


@dataclass(frozen=True, slots=True)
class Size:
    """What a document or a part of it holds: its depth in fields, its fields and
    aliases, and the values its costed fields ask for. Side by side (`+`): the deeper
    depth, the sum of the others."""

    depth: int
    fields: int
    cost: int

    def __add__(self, other: Size) -> Size:
        return Size(
            max(self.depth, other.depth), self.fields + other.fields, self.cost + other.cost
        )


NOTHING = Size(0, 0, 0)
FieldCost = Callable[[FieldNode], int]


class _Measure:
    """Sizes of a document's operations, fragments counted per use (see the module doc).

    `level` is the number of fields above the selection set being measured: a field past
    MAX_DEPTH is refused as soon as it is seen, which also bounds the recursion."""

    def __init__(self, document: DocumentNode, cost_of: FieldCost) -> None:
        self._fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        self._sizes: dict[str, Size] = {}
        self._open: list[str] = []
        self._cost_of = cost_of

    def document(self, document: DocumentNode) -> Size:
        total = NOTHING
        for definition in document.definitions:
            if isinstance(definition, OperationDefinitionNode):
                total += self._selections(definition.selection_set, 0)
        reached = set(self._sizes)
        for name, fragment in self._fragments.items():
            if name not in reached:
                total += self._fragment(name, fragment, 0)
        return total

    def _selections(self, selection_set: SelectionSetNode | None, level: int) -> Size:
        total = NOTHING
        for selection in selection_set.selections if selection_set else ():
            if isinstance(selection, FieldNode):
                total += self._field(selection, level + 1)
            elif isinstance(selection, InlineFragmentNode):
                total += self._selections(selection.selection_set, level)
            elif isinstance(selection, FragmentSpreadNode):
                total += self._spread(selection.name.value, level)
        return total

    def _field(self, node: FieldNode, level: int) -> Size:
        if level > MAX_DEPTH:
            raise too_complex(f"the query is nested more than {MAX_DEPTH} levels deep")
        inner = self._selections(node.selection_set, level)
        return Size(inner.depth + 1, inner.fields + 1, inner.cost + self._cost_of(node))

    def _spread(self, name: str, level: int) -> Size:
        fragment = self._fragments.get(name)
        if fragment is None or name in self._open:
            return NOTHING  # unknown or cyclic: validation says so
        size = self._fragment(name, fragment, level)
        if level + size.depth > MAX_DEPTH:
            raise too_complex(f"the query is nested more than {MAX_DEPTH} levels deep")
        return size

    def _fragment(self, name: str, fragment: FragmentDefinitionNode, level: int) -> Size:
        known = self._sizes.get(name)
        if known is not None:
            return known
        if len(self._open) >= MAX_FRAGMENT_NESTING:
            raise too_complex(f"fragments are nested more than {MAX_FRAGMENT_NESTING} deep")
        self._open.append(name)
        try:
            size = self._selections(fragment.selection_set, level)
        finally:
            self._open.pop()
        # Sizes are relative to the fragment, whatever the level of its first use.
        self._sizes[name] = size
        return size


def measure(document: DocumentNode, cost_of: FieldCost = lambda _: 0) -> Size:
    """Depth, fields and cost of a document; QUERY_TOO_COMPLEX if it is too deep."""
    return _Measure(document, cost_of).document(document)


def check_shape(document: DocumentNode) -> None:
    """QUERY_TOO_COMPLEX if the document is deeper than MAX_DEPTH or holds more than
    MAX_FIELDS fields and aliases."""
    size = measure(document)
    if size.fields > MAX_FIELDS:
        raise too_complex(f"the query holds more than {MAX_FIELDS:,} fields and aliases")
