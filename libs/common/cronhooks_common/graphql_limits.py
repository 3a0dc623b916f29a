"""How much one GraphQL request may ask for (CONTRACT §15), for both GraphQL APIs.

A request may hold at most 15 levels, 2,000 fields and aliases, list and object values
nested at most 64 levels (the bound of JSON request bodies, json_input.MAX_NESTING), and
(admin-api) 10,000 `nextRuns` values in all; beyond, it is refused with `extensions.code =
"QUERY_TOO_COMPLEX"` and a message naming the limit, before any resolver runs.

The limits are checked between parsing and validation (Ariadne's `query_parser` hook):
graphql-core's OverlappingFieldsCanBeMerged rule is quadratic in the fields of a selection
set, so a document of 100k aliases has to be refused before validation sees it. Parsing
itself stops after MAX_TOKENS tokens, so a huge document costs little to refuse.

Values: validation and coercion recurse through a literal (`notes(pattern: [[[…]]])`,
nested input objects, variable defaults, directive arguments) as parsing does, so a
literal nested past MAX_NESTING is refused before them, as a variable nested that deep is
(its JSON body is refused). graphql-core's parser itself gives up past 200 levels of
selections, values and types together; that is QUERY_TOO_COMPLEX too, naming both limits.

Counting: a fragment counts once per spread (its sizes are memoised, so a fragment spread
a thousand times is measured once); a fragment cycle counts nothing (validation reports
it); a fragment no operation reaches counts once (validation still walks it).

What a list field multiplies is known only once it runs (`cronWebhooks { nextRuns }` is
as large as the webhook list), so costed fields are checked twice: statically here, from
the document and the variables, and at run time by a per-request `Budget` that the
field's resolver charges.

Parsed documents are cached by query text, bounded by size (an AST takes about a hundred
times the memory of its text): only documents up to MAX_CACHED_DOCUMENT characters, at
most MAX_CACHED_CHARACTERS of them in all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    Node,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    parse,
    validate,
)
from graphql.validation import ASTValidationRule

from cronhooks_common.graphql_support import format_error
from cronhooks_common.json_input import MAX_NESTING

QUERY_TOO_COMPLEX = "QUERY_TOO_COMPLEX"
MAX_DEPTH = 15
MAX_FIELDS = 2000
# Far above what 2,000 fields with arguments need (and than a 1,000-note pushNotes in
# literals), far below what makes parsing slow: 20k tokens parse in about 0.2 s.
MAX_TOKENS = 20_000
# Spreads inside fragments inside fragments…: no real query nests them this deep, and the
# measuring below recurses through them.
MAX_FRAGMENT_NESTING = 50
MAX_CACHED_DOCUMENT = 16 << 10
MAX_CACHED_CHARACTERS = 256 << 10
MAX_CACHED_DOCUMENTS = 512


def too_complex(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": QUERY_TOO_COMPLEX})


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
        return too_complex(f"the request asks for more than {self.limit:,} {self.noun} in all")


class Budget:
    """What one request may still produce of a `ListCost` field; its resolver charges it
    before computing, so list fields cannot multiply the static count past the limit."""

    def __init__(self, cost: ListCost) -> None:
        self.cost = cost
        self.spent = 0
        self.refused = False

    def charge(self, values: int) -> None:
        if self.spent + values > self.cost.limit:
            self.refused = True
            raise self.cost.refusal()
        self.spent += values


@dataclass(frozen=True, slots=True)
class Size:
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


def value_nesting(document: DocumentNode, *, stop_after: int = MAX_NESTING) -> int:
    """How many levels the document's list and object values nest (the outermost is level
    1; none: 0), counting no further than `stop_after` + 1. Iterative: safe on any depth."""
    deepest = 0
    stack: list[tuple[Node, int]] = [(document, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (ListValueNode, ObjectValueNode)):
            level += 1
            if level > deepest:
                deepest = level
                if deepest > stop_after:
                    return deepest
        for key in node.keys:
            child = getattr(node, key, None)
            if isinstance(child, Node):
                stack.append((child, level))
            elif isinstance(child, (tuple, list)):
                stack.extend((c, level) for c in child if isinstance(c, Node))
    return deepest


def check_values(document: DocumentNode) -> None:
    """QUERY_TOO_COMPLEX if a list or object value nests deeper than MAX_NESTING levels."""
    if value_nesting(document) > MAX_NESTING:
        raise too_complex(f"a value in the query is nested more than {MAX_NESTING} levels deep")


def parse_limited(query: str) -> DocumentNode:
    """Parse at most MAX_TOKENS tokens (graphql-core also stops on nesting too deep for
    its recursion); either abort is QUERY_TOO_COMPLEX, other syntax errors stay as they are."""
    try:
        return parse(query, max_tokens=MAX_TOKENS)
    except GraphQLError as error:
        if "Document contains more than" in error.message and "tokens" in error.message:
            raise too_complex(f"the query holds more than {MAX_TOKENS:,} tokens") from None
        if "nested too deeply" in error.message:
            # Selections, values and types count together here: name both limits.
            raise too_complex(
                f"the query is nested more than {MAX_DEPTH} levels deep,"
                f" or a value in it more than {MAX_NESTING} levels"
            ) from None
        raise


def _variable_defaults(document: DocumentNode) -> dict[str, Any]:
    """Default values of the document's Int variables that have a literal default."""
    defaults: dict[str, Any] = {}
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


@dataclass(slots=True)
class _Entry:
    document: DocumentNode
    errors: list[GraphQLError] | None = None


class Documents:
    """Parses within the limits and caches what parsed (bounded by size, least recently
    used first out), with the validation errors of each cached document."""

    def __init__(self, costs: Collection[ListCost] = ()) -> None:
        self.costs = tuple(costs)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._by_id: dict[int, _Entry] = {}
        self._characters = 0

    def parse(self, query: str) -> DocumentNode:
        """The document of `query`, or QUERY_TOO_COMPLEX / a syntax error."""
        entry = self._entries.get(query)
        if entry is not None:
            self._entries.move_to_end(query)
            return entry.document
        document = parse_limited(query)
        check_shape(document)
        if query.count("[") + query.count("{") > MAX_NESTING:  # fewer cannot nest that deep
            check_values(document)
        if len(query) <= MAX_CACHED_DOCUMENT:
            self._remember(query, _Entry(document))
        return document

    def _remember(self, query: str, entry: _Entry) -> None:
        self._entries[query] = entry
        self._by_id[id(entry.document)] = entry
        self._characters += len(query)
        while self._characters > MAX_CACHED_CHARACTERS or len(self._entries) > MAX_CACHED_DOCUMENTS:
            old_query, old = self._entries.popitem(last=False)
            del self._by_id[id(old.document)]
            self._characters -= len(old_query)

    def check_costs(self, document: DocumentNode, variables: Mapping[str, Any]) -> None:
        """QUERY_TOO_COMPLEX if the document asks for more values of a costed field than
        its limit (counting every alias and fragment use; list sizes are unknown here)."""
        for cost in self.costs:
            if measure(document, list_cost(cost, document, variables)).cost > cost.limit:
                raise cost.refusal()

    def validate(
        self,
        schema: GraphQLSchema,
        document_ast: DocumentNode,
        rules: Collection[type[ASTValidationRule]] | None = None,
        max_errors: int | None = None,
        type_info: Any = None,
    ) -> list[GraphQLError]:
        """Ariadne's `query_validator`: validate each cached document once (one schema and
        one rule set per API, so the document alone decides the answer)."""
        entry = self._by_id.get(id(document_ast))
        if entry is not None and entry.document is document_ast and entry.errors is not None:
            return entry.errors
        errors = validate(schema, document_ast, rules, max_errors)
        if entry is not None and entry.document is document_ast:
            entry.errors = errors
        return errors


@dataclass
class LimitedRequest:
    """One request's Ariadne hooks: `query_parser` parses within the limits (and checks the
    costs with the request's variables); `format_error` knows the document it parsed."""

    documents: Documents
    document: DocumentNode | None = field(default=None, init=False)

    def query_parser(self, _context: Any, data: dict[str, Any]) -> DocumentNode:
        document = self.documents.parse(data["query"])
        self.document = document
        self.documents.check_costs(document, data.get("variables") or {})
        return document

    def format_error(self, error: GraphQLError, debug: bool = False) -> dict[str, Any]:
        return format_error(error, debug, document=self.document)
