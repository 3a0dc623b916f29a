"""The house: libs/ (shared code, the agent SDK) never imports a service or the CLI;
services import libs/; apps/cli composes them all. Checked on the source, by walking
every import of libs/ (and every string naming a package, as importlib would use it).

Two rules of house style are checked on the source too: no product module (a .py under
libs/, services/ or apps/) is longer than MAX_LINES, and libs/common keeps only what two
or more of its users share (a service, the CLI, the agent SDK); what one uses lives there."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ABOVE_LIBS = {
    "cronhooks_scheduler",
    "cronhooks_dispatcher",
    "cronhooks_importer",
    "cronhooks_admin",
    "cronhooks_cli",
}
COMMON = ROOT / "libs/common/cronhooks_common"
PRODUCT = ("libs", "services", "apps")
MAX_LINES = 300
# Modules longer than MAX_LINES by nature (generated code, migrations), each with the
# reason: none. Migrations are SQL, and nothing is generated.
LONG_BY_NATURE: dict[str, str] = {}
# Over MAX_LINES when the check came, being split meanwhile by their owners.
SHRINKING: frozenset[str] = frozenset()
# libs/common modules (top-level modules and packages) that are not imported, each with
# the reason.
NOT_IMPORTED = {
    "migrations": "the shared SQL migrations, read as package data by migrate.py",
}
# libs/common modules fewer than two users share when the check came, being moved meanwhile
# to the one that uses them (or taken up by the services).
MOVING_OUT: frozenset[str] = frozenset()


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
    tree = ast.parse(
        "import cronhooks_admin.auth\nfrom cronhooks_cli.cli import main\nimportlib.import_module('cronhooks_scheduler.app')\n"
    )
    assert [name for _, name in _imports(tree)] == [
        "cronhooks_admin.auth",
        "cronhooks_cli.cli",
        "cronhooks_scheduler.app",
    ]


def _product_modules() -> Iterator[Path]:
    for top in PRODUCT:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_no_product_module_is_longer_than_the_house_allows() -> None:
    lines = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in _product_modules()
    }
    assert len(lines) > 100, "the walk found the product modules"
    over = {module: n for module, n in lines.items() if n > MAX_LINES}
    problems = [
        f"{module}: {n} lines, {n - MAX_LINES} over {MAX_LINES}: split it along its seams,"
        " one job per module (keep its import path for its users: re-export what moved)"
        for module, n in sorted(over.items())
        if module not in SHRINKING and module not in LONG_BY_NATURE
    ]
    problems += [
        f"{module} is in SHRINKING: {f'{lines[module]} lines now' if module in lines else 'gone'}:"
        " remove it from there"
        for module in sorted(SHRINKING - over.keys())
    ]
    problems += [
        f"{module} is in LONG_BY_NATURE: {f'{lines[module]} lines now' if module in lines else 'gone'}:"
        " remove it from there"
        for module in sorted(LONG_BY_NATURE.keys() - over.keys())
    ]
    assert not problems, (
        f"no module longer than {MAX_LINES} lines (house style); in tests/unit/test_layers.py"
        " terms:\n" + "\n".join(problems)
    )


def _users() -> dict[str, Path]:
    """Who libs/common is for, by name: each service, the CLI and the agent SDK, with the
    package that is each one's code."""
    roots = {path.name: path for path in sorted((ROOT / "services").iterdir())}
    roots |= {"cli": ROOT / "apps/cli", "agent": ROOT / "libs/agent"}
    users = {name: package for name, root in roots.items() for package in root.glob("cronhooks_*")}
    assert len(users) >= 6, f"the walk found four services, the CLI and the SDK: {users}"
    return users


def _common_modules() -> set[str]:
    return {p.stem for p in COMMON.glob("*.py") if p.stem != "__init__"} | {
        p.parent.name for p in COMMON.glob("*/__init__.py")
    }


_DOTTED = re.compile(r"cronhooks_common(\.\w+)+")


def _package(path: Path) -> list[str]:
    """The dotted package `path` is in: ["cronhooks_common", "events"] for events/base.py."""
    parts = path.parent.parts
    top = next(i for i, part in enumerate(parts) if part.startswith("cronhooks_"))
    return list(parts[top:])


def _common_named(path: Path, tree: ast.AST) -> set[str]:
    """The libs/common modules `path` imports, by their first level (`events` for
    `cronhooks_common.events.names`): imports, relative ones, and importlib strings."""
    named: set[str] = set()
    for node in ast.walk(tree):
        dotted: list[list[str]] = []
        if isinstance(node, ast.Import):
            dotted = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            package = _package(path)
            base = package[: len(package) - node.level + 1] if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            # `from cronhooks_common import eventstore` names the module in the alias
            dotted = [module] if len(module) > 1 else [[*module, a.name] for a in node.names]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _DOTTED.fullmatch(node.value)
        ):
            dotted = [node.value.split(".")]
        named |= {d[1] for d in dotted if len(d) > 1 and d[0] == "cronhooks_common"}
    return named


def _common_users() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """For each libs/common module: which users import it, and which other libs/common
    modules do."""
    modules = _common_modules()
    by_users: dict[str, set[str]] = {m: set() for m in modules}
    by_common: dict[str, set[str]] = {m: set() for m in modules}
    for user, root in _users().items():
        for path in sorted(root.rglob("*.py")):
            for module in _common_named(path, ast.parse(path.read_text(), str(path))):
                by_users.get(module, set()).add(user)
    for path in sorted(COMMON.rglob("*.py")):
        inside = path.relative_to(COMMON).parts
        owner = inside[0].removesuffix(".py") if len(inside) == 1 else inside[0]
        for module in _common_named(path, ast.parse(path.read_text(), str(path))):
            if module != owner and owner != "__init__":
                by_common.get(module, set()).add(owner)
    return by_users, by_common


def _common_path(module: str) -> str:
    path = COMMON / f"{module}.py"
    return str((path if path.exists() else COMMON / module).relative_to(ROOT))


def test_libs_common_keeps_only_what_two_or_more_use() -> None:
    by_users, by_common = _common_users()
    assert {"consumer", "events", "eventstore"} <= by_users.keys(), "the walk found libs/common"
    kept = {module for module, users in by_users.items() if len(users) >= 2}
    while more := {m for m in by_users.keys() - kept if by_common[m] & kept}:
        kept |= more  # what a kept module imports is kept: its users use it too
    homes = {name: str(package.relative_to(ROOT)) for name, package in _users().items()}
    problems = []
    for module in sorted(by_users.keys() - kept - MOVING_OUT - NOT_IMPORTED.keys()):
        users, through = sorted(by_users[module]), sorted(by_common[module])
        used = f"used by {' and '.join(users)} only" if users else "used by no user"
        if through:
            used += f", imported by {', '.join(through)} of libs/common (not kept either)"
        if len(users) == 1:
            move = f"move it into {homes[users[0]]} and import it from there"
        elif through:
            move = f"move it where {', '.join(through)} go"
        else:
            move = "nothing imports it: delete it"
        problems.append(f"{_common_path(module)}: {used}: {move} (or give it a second user)")
    unkept = by_users.keys() - kept
    problems += [
        f"{module} is in MOVING_OUT: {'two or more use it now' if module in kept else 'gone'}:"
        " remove it from there"
        for module in sorted(MOVING_OUT - unkept)
    ]
    problems += [
        f"{module} is in NOT_IMPORTED: {'imported now' if module in kept else 'gone'}:"
        " remove it from there"
        for module in sorted(NOT_IMPORTED.keys() - unkept)
    ]
    assert not problems, (
        "libs/common keeps what two or more of the services, the CLI and the agent SDK use"
        " (and what such a module imports); in tests/unit/test_layers.py terms:\n"
        + "\n".join(problems)
    )


def test_the_walk_sees_every_way_of_naming_a_common_module() -> None:
    source = (
        "from .. import eventstore\n"
        "from ..consumer import Consumer\n"
        "from . import names\n"
        "import cronhooks_common.tail\n"
        "from cronhooks_common import logs, db\n"
        "from cronhooks_common.acks import AckBatcher\n"
        "importlib.import_module('cronhooks_common.work')\n"
        "doc = 'cronhooks_common.trust decides'\n"
    )
    inside = COMMON / "events/example.py"
    named = _common_named(inside, ast.parse(source))
    assert named == {"eventstore", "consumer", "events", "tail", "logs", "db", "acks", "work"}
