"""What users read points only at documents they have: the README, docs/, `cronhooks --help`,
the GraphQL schema's descriptions and the strings the code shows (error messages, metric
help) never cite the project's internal CONTRACT, whose sections are not in the repository;
they link to docs/reference/. Comments and docstrings are for developers and may.

Terms from other projects have one explaining line in the reference, and the README
starts with what a new user needs installed."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

from cronhooks_cli.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
CODE = [ROOT / d for d in ("apps", "libs", "services")]


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings_shown(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def _helps(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                texts += _helps(sub)
    return texts


def test_readme_and_docs_do_not_cite_the_contract() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pages += sorted((ROOT / "docs").rglob("*.yaml"))
    cited = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in pages
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "CONTRACT" in line or "§" in line  # a bare "§16.3" points there too
    ]
    assert not cited, cited


def test_cli_help_does_not_cite_the_contract() -> None:
    helps = _helps(_parser())
    assert len(helps) > 10
    assert not [h for h in helps if "CONTRACT" in h]
    assert "docs/reference/" in helps[0]


def test_strings_the_code_shows_do_not_cite_the_contract() -> None:
    modules = [p for d in CODE for p in d.rglob("*.py")]
    assert len(modules) > 100
    shown = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in modules
        for n, text in _strings_shown(p)
        if "CONTRACT" in text
    ]
    assert not shown, shown


def test_graphql_descriptions_do_not_cite_the_contract() -> None:
    schemas = [p for d in CODE for p in d.rglob("*.graphql")]
    assert schemas
    for schema in schemas:
        # Descriptions are strings; `#` comments are for developers.
        text = re.sub(r"#[^\n]*", "", schema.read_text())
        assert "CONTRACT" not in text, schema.relative_to(ROOT)


def test_terms_from_other_projects_are_explained_in_the_reference() -> None:
    terms = (ROOT / "docs/reference/README.md").read_text().split("## Terms", 1)[1]
    for term in ("trip2g", "trip2g's scheme", "Chronos", "hermes"):
        assert term in terms, term


def test_the_readme_starts_with_prerequisites() -> None:
    readme = (ROOT / "README.md").read_text()
    first = re.findall(r"^## (.+)$", readme, re.M)[0]
    assert first == "Prerequisites"
    section = readme.split("## Prerequisites", 1)[1].split("\n## ", 1)[0]
    for needed in ("Python ≥ 3.11", "make", "apt", "Postgres", "RabbitMQ", "Chromium"):
        assert needed in section, needed


def test_the_readme_command_table_has_every_command() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n\n", 2)[1]
    for action in _parser()._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
            for command in [f"{name} {n}" for a in nested for n in a.choices] or [name]:
                # `admin list-tokens` / `revoke-token ID` share a row: the last word will do.
                last = command.split()[-1]
                assert f"cronhooks {command}" in table or f"`{last}" in table, command
