"""JSON from outside — agents' answers and request bodies — parsed totally (CONTRACT §15).

Every JSON document a service takes from outside goes through `loads`: the standard
library's parser (its handling of edge cases is what the input rules were written
against), then a nesting bound. A document nested deeper than MAX_NESTING levels (the
outermost array or object is level 1) is refused with `TooDeep`, whatever its size:
the steps after parsing (validation, the walks that check text for NUL, GraphQL's
variable coercion) recurse, and a 3 KB answer nested 500 levels deep must not reach them.

The bound is checked on the parsed value, iteratively: parsing itself stops at the
interpreter's recursion limit (~1,000 levels; a RecursionError there is also `TooDeep`),
and walking the containers costs far less than parsing a body of the same size.
"""

from __future__ import annotations

import json
from typing import Any

MAX_NESTING = 64


class TooDeep(ValueError):
    """The document is nested deeper than MAX_NESTING levels. A ValueError, so a caller
    that only knows "not JSON" still refuses it; callers word it with `what`."""

    def __init__(self, what: str = "JSON") -> None:
        super().__init__(f"{what} nested deeper than {MAX_NESTING} levels")


def loads(raw: bytes | str, *, what: str = "JSON") -> Any:
    """The parsed document; ValueError (or UnicodeDecodeError) if it is not JSON, TooDeep
    (`"{what} nested deeper than 64 levels"`) if it nests too deep."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise TooDeep(what) from None
    if _openers(raw) > MAX_NESTING and nesting(value) > MAX_NESTING:
        raise TooDeep(what)
    return value


def _openers(raw: bytes | str) -> int:
    """How many `[` and `{` the text holds, in strings too: a bound on how deep what it
    parses to can nest, counted in C. Most documents hold fewer than MAX_NESTING, and
    then the walk is not needed. (In UTF-16 and UTF-32, which the parser also takes,
    each bracket still holds its ASCII byte.)"""
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def nesting(value: Any, *, stop_after: int = MAX_NESTING) -> int:
    """How many levels of arrays and objects `value` nests (a scalar: 0), counting no
    further than `stop_after` + 1. Iterative: safe on any depth."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 1
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        container, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > stop_after:
                return deepest
        children = container.values() if isinstance(container, dict) else container
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, level + 1))
    return deepest
