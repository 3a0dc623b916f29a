"""How much one GraphQL request may ask for (CONTRACT §15), for both GraphQL APIs.

A request may hold at most 15 levels, 2,000 fields and aliases, list and object values
nested at most 64 levels (the bound of JSON request bodies, json_input.MAX_NESTING), and
(admin-api) 10,000 `nextRuns` values in all; beyond, it is refused with `extensions.code =
"QUERY_TOO_COMPLEX"` and a message naming the limit, before any resolver runs.

The limits are checked between parsing and validation (Ariadne's `query_parser` hook):
graphql-core's OverlappingFieldsCanBeMerged rule is quadratic in the fields of a selection
set, so a document of 100k aliases has to be refused before validation sees it. Parsing
itself stops after MAX_TOKENS tokens, so a huge document costs little to refuse.

The checks live in their own modules; this one holds the request's hooks and the cache,
and is where the APIs import every name from:
- graphql_parse.py: parsing within MAX_TOKENS and the parser's nesting, literal nesting;
- graphql_shape.py: depth, fields and aliases (fragments per use), the refusal itself;
- graphql_costs.py: costed list fields, statically and by a run-time `Budget`.

Parsed documents are cached by query text, bounded by size (an AST takes about a hundred
times the memory of its text): only documents up to MAX_CACHED_DOCUMENT characters, at
most MAX_CACHED_CHARACTERS of them in all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

# `validate` is looked up here at each call: tests count validations by replacing it.
from graphql import DocumentNode, GraphQLError, GraphQLSchema, validate
from graphql.validation import ASTValidationRule

from cronhooks_common.graphql_costs import Budget, ListCost, list_cost
from cronhooks_common.graphql_parse import MAX_TOKENS, check_values, parse_limited, value_nesting
from cronhooks_common.graphql_shape import (
    MAX_DEPTH,
    MAX_FIELDS,
    MAX_FRAGMENT_NESTING,
    NOTHING,
    QUERY_TOO_COMPLEX,
    FieldCost,
    Size,
    check_shape,
    measure,
    too_complex,
)
from cronhooks_common.graphql_support import format_error
from cronhooks_common.json_input import MAX_NESTING

__all__ = [
    "MAX_CACHED_CHARACTERS",
    "MAX_CACHED_DOCUMENT",
    "MAX_CACHED_DOCUMENTS",
    "MAX_DEPTH",
    "MAX_FIELDS",
    "MAX_FRAGMENT_NESTING",
    "MAX_TOKENS",
    "NOTHING",
    "QUERY_TOO_COMPLEX",
    "Budget",
    "Documents",
    "FieldCost",
    "LimitedRequest",
    "ListCost",
    "Size",
    "check_shape",
    "check_values",
    "list_cost",
    "measure",
    "parse_limited",
    "too_complex",
    "value_nesting",
]

MAX_CACHED_DOCUMENT = 16 << 10
MAX_CACHED_CHARACTERS = 256 << 10
MAX_CACHED_DOCUMENTS = 512


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
