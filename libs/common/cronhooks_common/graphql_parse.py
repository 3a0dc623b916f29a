"""Parsing a GraphQL query within bounds: its tokens, the parser's own nesting, and the
nesting of its literal values.

Parsing stops after MAX_TOKENS tokens, so a huge document costs little to refuse.
graphql-core's parser itself gives up past 200 levels of selections, values and types
together; that is QUERY_TOO_COMPLEX too, naming both limits.

Values: validation and coercion recurse through a literal (`notes(pattern: [[[…]]])`,
nested input objects, variable defaults, directive arguments) as parsing does, so a
literal nested past MAX_NESTING (the bound of JSON request bodies, json_input.py) is
refused before them, as a variable nested that deep is (its JSON body is refused).
"""

from __future__ import annotations

from graphql import DocumentNode, GraphQLError, ListValueNode, Node, ObjectValueNode, parse

from cronhooks_common.graphql_shape import MAX_DEPTH, too_complex
from cronhooks_common.json_input import MAX_NESTING

# Far above what 2,000 fields with arguments need (and than a 1,000-note pushNotes in
# literals), far below what makes parsing slow: 20k tokens parse in about 0.2 s.
MAX_TOKENS = 20_000


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
