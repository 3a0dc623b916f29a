"""Every GraphQL block of the docs is valid against the schema it is written for, even
where no test runs it against live data (operations.md's alerts, replay and pause; the
agent GraphQL of agent-api.md; the README): a renamed field or argument fails here, not in
a reader's terminal. The agent API's schema excerpt in agent-api.md is checked field by
field against the served schema. (graphql.md's and the README's blocks are also run:
tests/integration/test_reference_examples.py, test_readme_examples.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphql import GraphQLSchema, build_schema, parse, validate

from cronhooks_admin.graphql.schema import build_schema as build_admin_schema
from cronhooks_importer.agent_graphql import build_agent_schema

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```graphql\n(.*?)```", re.S)
ADMIN_PAGES = ["README.md", "docs/reference/graphql.md", "docs/reference/operations.md"]


def operations(page: str) -> list[str]:
    """The page's GraphQL blocks that are operations (not schema excerpts)."""
    return [
        b for b in BLOCK.findall((ROOT / page).read_text()) if not b.lstrip().startswith("type ")
    ]


def errors(schema: GraphQLSchema, operation: str) -> list[str]:
    return [e.message for e in validate(schema, parse(operation))]


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_every_admin_graphql_block_is_valid(page: str) -> None:
    schema = build_admin_schema()
    found = operations(page)
    assert found, f"{page} has no GraphQL blocks"
    bad = {block: errors(schema, block) for block in found}
    # graphql.md shows a few refusals on purpose: those answer with the errors the page
    # shows next to them (run by the integration test), so only the valid-looking ones
    # must validate.
    bad = {b: e for b, e in bad.items() if e and not _shown_as_refused(page, b)}
    assert not bad, bad


def _shown_as_refused(page: str, block: str) -> bool:
    text = (ROOT / page).read_text()
    after = text[text.index(block) + len(block) :][:1500]
    return '"GRAPHQL_VALIDATION_FAILED"' in after or '"BAD_USER_INPUT"' in after


def test_every_agent_graphql_operation_is_valid() -> None:
    schema = build_agent_schema()
    found = operations("docs/reference/agent-api.md")
    assert found
    for block in found:
        assert not errors(schema, block), block


def test_the_agent_schema_excerpt_matches_the_served_schema() -> None:
    [excerpt] = [
        b
        for b in BLOCK.findall((ROOT / "docs/reference/agent-api.md").read_text())
        if b.lstrip().startswith("type ")
    ]
    shown = build_schema(re.sub(r"#[^\n]*", "", excerpt).replace("DateTime", "String"))
    served = build_agent_schema()
    for name, shown_type in shown.type_map.items():
        if name.startswith("__") or name in {"String", "Int", "Boolean", "Float", "ID"}:
            continue
        real = served.type_map.get(name)
        assert real is not None, f"agent-api.md shows type {name}, which the schema lacks"
        shown_fields = getattr(shown_type, "fields", None)
        if shown_fields is None:
            continue
        for field, shown_field in shown_fields.items():
            real_field = real.fields.get(field)  # type: ignore[attr-defined]
            assert real_field is not None, f"{name}.{field} is not in the agent schema"
            want = str(shown_field.type)
            got = str(real_field.type).replace("DateTime", "String")
            assert want == got, f"{name}.{field}: agent-api.md says {want}, the schema {got}"
