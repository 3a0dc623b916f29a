"""docs/reference/ names what the code has, and only that (cheap checks; the examples are
run by tests/integration/test_reference_examples.py).

* every setting is in configuration.md's table, with its default; every `CRONHOOKS_*`
  named anywhere in the reference is a setting;
* every query and mutation field of the admin schema is in graphql.md, of the agent schema
  in agent-api.md; every event type is a routing key of events.md; every CLI command is in
  configuration.md;
* every relative link of the reference leads to a file, and every `#anchor` to a heading.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from cronhooks_admin.graphql.schema import build_schema
from cronhooks_cli.cli import _parser
from cronhooks_common.events import EventType
from cronhooks_common.settings import PREFIX, Settings
from cronhooks_importer.agent_graphql import build_agent_schema

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
PAGES = sorted(REFERENCE.glob("*.md"))
# Pages other branches add; a link to one of them is allowed before it lands.
PENDING: set[Path] = set()


def text(name: str) -> str:
    return (REFERENCE / name).read_text()


def settings_table() -> dict[str, str]:
    """Variable → its default cell, from the table of configuration.md."""
    section = text("configuration.md").split("## Variables", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `(CRONHOOKS_[A-Z_]+)` \| ([^|]*) \|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


def test_every_setting_is_in_the_configuration_table_with_its_default() -> None:
    table = settings_table()
    variables = {f"{PREFIX}{f.name.upper()}": f for f in fields(Settings)}
    assert set(table) == set(variables)
    for name, field in variables.items():
        cell = table[name]
        if field.default is MISSING or field.default is None or field.default == ():
            assert not cell.startswith("`"), f"{name}: the code has no default, the page {cell}"
            continue
        value = field.default
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert cell == f"`{shown}`", f"{name}: default {shown!r}, the page says {cell}"


def test_every_variable_named_in_the_reference_is_a_setting() -> None:
    known = {f"{PREFIX}{f.name.upper()}" for f in fields(Settings)}
    for page in PAGES:
        named = set(re.findall(r"\bCRONHOOKS_[A-Z][A-Z_]*[A-Z]\b", page.read_text()))
        assert named <= known, f"{page.name}: {sorted(named - known)}"


def _fields(schema, kind: str) -> set[str]:  # type: ignore[no-untyped-def]
    root = schema.query_type if kind == "query" else schema.mutation_type
    return set(root.fields)


@pytest.mark.parametrize("kind", ["query", "mutation"])
def test_every_admin_field_is_in_graphql_md(kind: str) -> None:
    page = text("graphql.md")
    missing = {f for f in _fields(build_schema(), kind) if not re.search(rf"\b{f}\b", page)}
    assert not missing, f"graphql.md does not mention these {kind} fields: {sorted(missing)}"


@pytest.mark.parametrize("kind", ["query", "mutation"])
def test_every_agent_field_is_in_agent_api_md(kind: str) -> None:
    page = text("agent-api.md")
    missing = {f for f in _fields(build_agent_schema(), kind) if not re.search(rf"\b{f}\b", page)}
    assert not missing, f"agent-api.md does not mention these {kind} fields: {sorted(missing)}"


def test_every_event_type_is_a_routing_key_of_events_md_and_only_those() -> None:
    keys = set(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \|", text("events.md"), re.M))
    assert keys == {str(t) for t in EventType}


def test_every_cli_command_is_in_configuration_md() -> None:
    page = text("configuration.md")
    for action in _parser()._subparsers._group_actions:  # type: ignore[union-attr]
        assert isinstance(action.choices, dict)
        for name, sub in action.choices.items():
            nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
            commands = [f"{name} {n}" for a in nested for n in a.choices] or [name]
            for command in commands:
                assert f"cronhooks {command}" in page, f"cronhooks {command}"


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_every_link_of_the_reference_resolves() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # an external URL
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if linked in PENDING:
                continue
            assert linked.exists(), f"{page.name}: {target}"
            if anchor:
                assert anchor in _anchors(linked), f"{page.name}: {target}"
