"""The GraphQL request limits (CONTRACT §15) on documents, without a server: depth, fields
and aliases (fragments per use, cycles, unused fragments), the token cap, the nextRuns
count from literals, variables and defaults, the run-time budget, and the bounded cache."""

from __future__ import annotations

import time

import pytest
from graphql import GraphQLError, build_schema, get_introspection_query

from cronhooks_admin.graphql.context import NEXT_RUNS
from cronhooks_common import graphql_limits
from cronhooks_common.graphql_limits import (
    MAX_DEPTH,
    MAX_FIELDS,
    MAX_TOKENS,
    QUERY_TOO_COMPLEX,
    Budget,
    Documents,
    LimitedRequest,
    check_shape,
    list_cost,
    measure,
    parse_limited,
    value_nesting,
)
from cronhooks_common.json_input import MAX_NESTING


def refusal(query: str, variables: dict[str, object] | None = None) -> str:
    """The QUERY_TOO_COMPLEX message for `query` (fails the test if it is accepted)."""
    with pytest.raises(GraphQLError) as caught:
        LimitedRequest(Documents([NEXT_RUNS])).query_parser(
            None, {"query": query, "variables": variables}
        )
    assert caught.value.extensions == {"code": QUERY_TOO_COMPLEX}, caught.value
    return caught.value.message


def accepted(query: str, variables: dict[str, object] | None = None) -> None:
    LimitedRequest(Documents([NEXT_RUNS])).query_parser(
        None, {"query": query, "variables": variables}
    )


def nested(levels: int) -> str:
    return "{ " + "a { " * (levels - 1) + "b" + " }" * levels


def aliases(count: int, selection: str = "agents { id }") -> str:
    return "{ " + " ".join(f"a{i}: {selection}" for i in range(count)) + " }"


def test_fifteen_levels_pass_and_sixteen_are_refused_naming_the_limit() -> None:
    accepted(nested(MAX_DEPTH))
    assert "15 levels" in refusal(nested(MAX_DEPTH + 1))


def test_depth_counts_through_fragments_and_inline_fragments() -> None:
    inner = "a { " * 8 + "b" + " }" * 8  # 9 levels
    fifteen = "{ x { ...F } } fragment F on T { ... on T { y { z { w { v { u { %s } } } } } } }"
    accepted(fifteen % inner)
    assert "15 levels" in refusal(fifteen % ("t { " + inner + " }"))


def test_nesting_too_deep_for_the_parser_is_too_complex_not_a_crash() -> None:
    assert "15 levels" in refusal("{a" * 5000)


def lists(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def objects(levels: int) -> str:
    return "{a: " * levels + "1" + "}" * levels


VALUE_PLACES = [
    "{ notes(pattern: VALUE) { path } }",  # an argument
    "mutation { createApiKey(input: VALUE) { key } }",  # an input object
    "query($p: String = VALUE) { notes(pattern: $p) { path } }",  # a variable's default
    "{ __typename @include(if: VALUE) }",  # a directive's argument
    "{ ...F } fragment F on Query { notes(limit: VALUE) { path } }",  # inside a fragment
]


@pytest.mark.parametrize("place", VALUE_PLACES)
@pytest.mark.parametrize("value", [lists, objects])
def test_values_nest_64_levels_and_65_are_refused_naming_the_limit(place, value) -> None:  # type: ignore[no-untyped-def]
    accepted(place.replace("VALUE", value(MAX_NESTING)))
    message = refusal(place.replace("VALUE", value(MAX_NESTING + 1)))
    assert message == "a value in the query is nested more than 64 levels deep"


def test_value_levels_count_from_the_outermost_list_or_object() -> None:
    document = parse_limited('{ a(x: [1, [2, {b: [3]}]], y: {c: {d: "e"}}) { f(z: []) } }')
    assert value_nesting(document) == 4
    assert value_nesting(parse_limited("{ a(x: 1) }")) == 0
    # Brackets in strings, block strings and comments are no values.
    assert value_nesting(parse_limited('{ a(x: "[[[[", y: """{{{{""") } # [[[[')) == 0


def test_values_too_deep_for_the_parser_are_too_complex_naming_both_limits() -> None:
    for query in ("{ a(x: " + lists(5_000) + ") }", "{ a(x: " + objects(3_000) + ") }"):
        message = refusal(query)
        assert "15 levels" in message and "64 levels" in message


def test_counting_values_stops_past_the_bound() -> None:
    """A wide document is walked once; a deep one no further than the bound."""
    wide = "{ a(x: [" + ", ".join(["[[1]]"] * 3_000) + "]) }"
    started = time.perf_counter()
    assert value_nesting(parse_limited(wide)) == 3
    assert value_nesting(parse_limited("{ a(x: " + lists(190) + ") }")) == MAX_NESTING + 1
    assert time.perf_counter() - started < 1.0


def test_two_thousand_fields_and_aliases_pass_one_more_is_refused() -> None:
    accepted(aliases(MAX_FIELDS // 2))  # each alias: agents + id
    assert "2,000 fields and aliases" in refusal(aliases(MAX_FIELDS // 2) + "{ one_more }")


def test_fragment_fields_count_once_per_use() -> None:
    ten = " ".join(f"f{i}" for i in range(10))
    spreads = " ".join(f"s{i}: x {{ ...F }}" for i in range(181))  # 181 × 11 = 1,991
    accepted("{ " + spreads + " } fragment F on T { " + ten + " }")
    spreads = " ".join(f"s{i}: x {{ ...F }}" for i in range(182))  # 2,002
    assert "2,000" in refusal("{ " + spreads + " } fragment F on T { " + ten + " }")


def test_fragments_spread_exponentially_are_measured_once_each() -> None:
    # F0 → F1 twice → F2 twice …: 2^30 fields, measured in microseconds thanks to the memo.
    chain = " ".join(f"fragment F{i} on T {{ ...F{i + 1} ...F{i + 1} }}" for i in range(30))
    started = time.perf_counter()
    assert "2,000" in refusal("{ ...F0 } " + chain + " fragment F30 on T { leaf }")
    assert time.perf_counter() - started < 0.5


def test_a_fragment_cycle_counts_nothing_and_is_left_to_validation() -> None:
    size = measure(parse_limited("{ ...A } fragment A on T { a ...B } fragment B on T { b ...A }"))
    assert (size.depth, size.fields) == (1, 2)


def test_deeply_nested_fragment_spreads_are_refused_not_a_recursion_error() -> None:
    chain = " ".join(f"fragment F{i} on T {{ ...F{i + 1} }}" for i in range(1000))
    assert "fragments are nested more than" in refusal(
        "{ ...F0 } " + chain + " fragment F1000 on T { x }"
    )


def test_an_unused_fragment_still_counts_as_validation_walks_it() -> None:
    assert "2,000" in refusal("{ a } fragment Unused on T " + aliases(MAX_FIELDS))


def test_a_huge_document_stops_parsing_at_the_token_cap() -> None:
    query = aliases(100_000)  # 2.2 MB, 600k tokens
    started = time.perf_counter()
    message = refusal(query)
    elapsed = time.perf_counter() - started
    print(f"\n100k aliases refused after {elapsed:.3f} s: {message}")
    assert f"{MAX_TOKENS:,} tokens" in message
    assert elapsed < 2


def test_a_plain_syntax_error_stays_a_syntax_error() -> None:
    with pytest.raises(GraphQLError) as caught:
        parse_limited("{ a ")
    assert caught.value.message.startswith("Syntax Error") and not caught.value.extensions


def test_the_full_introspection_query_passes() -> None:
    # graphql-core's, with every option: depth exactly 15 (GraphiQL 3 sends a shallower one).
    query = get_introspection_query(
        descriptions=True,
        specified_by_url=True,
        directive_is_repeatable=True,
        schema_description=True,
        input_value_deprecation=True,
    )
    check_shape(parse_limited(query))
    assert measure(parse_limited(query)).depth == MAX_DEPTH


def cost(query: str, variables: dict[str, object] | None = None) -> int:
    document = parse_limited(query)
    return measure(document, list_cost(NEXT_RUNS, document, variables or {})).cost


def test_next_runs_values_from_literals_variables_and_defaults() -> None:
    assert cost("{ w { nextRuns } }") == 5  # the argument's default
    assert cost("{ w { nextRuns(count: 100) } }") == 100
    assert cost("query($n: Int) { w { nextRuns(count: $n) } }", {"n": 42}) == 42
    assert cost("query($n: Int = 7) { w { nextRuns(count: $n) } }") == 7  # variable's default
    assert cost("query($n: Int) { w { nextRuns(count: $n) } }") == 5  # absent: argument default
    # values the resolver refuses produce nothing (it answers BAD_USER_INPUT)
    assert (
        cost("{ w { a: nextRuns(count: 101) b: nextRuns(count: -1) c: nextRuns(count: null) } }")
        == 0
    )
    assert cost("query($n: Int) { w { nextRuns(count: $n) } }", {"n": True}) == 0


def test_next_runs_values_add_up_over_aliases_and_fragment_uses() -> None:
    assert cost("{ a: w { nextRuns } b: w { nextRuns(count: 10) } }") == 15
    assert cost("{ a: w { ...F } b: w { ...F } } fragment F on W { nextRuns(count: 30) }") == 60


def test_more_than_ten_thousand_next_runs_values_are_refused_naming_the_limit() -> None:
    accepted(aliases(100, "cronWebhooks { nextRuns(count: 100) }"))  # exactly 10,000
    message = refusal(aliases(101, "cronWebhooks { nextRuns(count: 100) }"))
    assert message == "the request asks for more than 10,000 nextRuns values in all"
    # the same cached document, with variables that make it too costly
    query = "query($n: Int) " + aliases(200, "cronWebhooks { nextRuns(count: $n) }")
    documents = Documents([NEXT_RUNS])
    LimitedRequest(documents).query_parser(None, {"query": query, "variables": {"n": 50}})
    with pytest.raises(GraphQLError, match="10,000 nextRuns"):
        LimitedRequest(documents).query_parser(None, {"query": query, "variables": {"n": 51}})


def test_the_budget_refuses_what_goes_past_the_limit_and_remembers_it() -> None:
    budget = Budget(NEXT_RUNS)
    for _ in range(100):
        budget.charge(100)
    assert not budget.refused
    with pytest.raises(GraphQLError) as caught:
        budget.charge(1)
    assert caught.value.extensions == {"code": QUERY_TOO_COMPLEX}
    assert budget.refused and budget.spent == 10_000


def test_the_cache_keeps_small_documents_within_its_bound() -> None:
    documents = Documents()
    small = "{ cronWebhooks { id } }"
    assert documents.parse(small) is documents.parse(small)
    big = '{ a(s: "' + "x" * graphql_limits.MAX_CACHED_DOCUMENT + '") }'
    assert documents.parse(big) is not documents.parse(big)  # too large to keep
    for i in range(5_000):
        documents.parse("{ f" + str(i) + " " + "y " * 100 + "}")
    assert documents._characters <= graphql_limits.MAX_CACHED_CHARACTERS
    assert len(documents._entries) == len(documents._by_id) <= graphql_limits.MAX_CACHED_DOCUMENTS
    assert documents.parse(small) is not None


def test_validation_errors_are_cached_with_their_document() -> None:
    schema = build_schema("type Query { a: Int }")
    documents = Documents()
    document = documents.parse("{ b }")
    first = documents.validate(schema, document)
    assert first and documents.validate(schema, document) is first
