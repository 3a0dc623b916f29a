"""The house: libs/ (shared code, the agent SDK) never imports a service or the CLI;
services import libs/; apps/cli composes them all. Checked on the source, by walking
every import of libs/ (and every string naming a package, as importlib would use it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ABOVE_LIBS = {"cronhooks_scheduler", "cronhooks_dispatcher", "cronhooks_importer", "cronhooks_admin", "cronhooks_cli"}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            # importlib.import_module("…") / resources.files("…") take package names
            and node.value.split(".")[0] in ABOVE_LIBS
        ):
            found.append((node.lineno, node.value))
    return found


def test_nothing_in_libs_imports_a_service_or_the_cli() -> None:
    sources = sorted((ROOT / "libs").rglob("*.py"))
    assert len(sources) > 20, "the walk found libs/"
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sources
        for line, name in _imports(ast.parse(path.read_text(), str(path)))
        if name.split(".")[0] in ABOVE_LIBS
    ]
    assert not offenders, "libs/ must not import what is above it:\n" + "\n".join(offenders)


def test_services_do_not_import_the_cli() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted((ROOT / "services").rglob("*.py"))
        for line, name in _imports(ast.parse(path.read_text(), str(path)))
        if name.split(".")[0] == "cronhooks_cli"
    ]
    assert not offenders, "\n".join(offenders)


def test_the_walk_sees_a_forbidden_import() -> None:
    tree = ast.parse("import cronhooks_admin.auth\nfrom cronhooks_cli.cli import main\nimportlib.import_module('cronhooks_scheduler.app')\n")
    assert [name for _, name in _imports(tree)] == ["cronhooks_admin.auth", "cronhooks_cli.cli", "cronhooks_scheduler.app"]
