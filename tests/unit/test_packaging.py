"""docker-compose.yml and the image are kept correct by review and by these checks
(no Docker engine runs here)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from cronhooks_common.cli import _parser
from cronhooks_common.migrate import COMPONENTS
from cronhooks_common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def _interpolate(value: str) -> str:
    # ${VAR:-default} → default, ${VAR:?msg} → a valid stand-in
    value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "x" * 40, value)


def test_images_and_services(compose) -> None:  # type: ignore[no-untyped-def]
    services = compose["services"]
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["rabbitmq"]["image"] == "rabbitmq:3-management"
    assert {"migrate", "admin-api", "importer", "scheduler", "dispatcher"} <= set(services)
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
            assert dependency != name


def test_build_context_files_exist(compose) -> None:  # type: ignore[no-untyped-def]
    for service in compose["services"].values():
        build = service.get("build")
        if build:
            context = ROOT / build["context"]
            assert (context / build["dockerfile"]).is_file()
    dockerfile = (ROOT / "infra/Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY"):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source


def test_commands_are_valid_cli_invocations(compose) -> None:  # type: ignore[no-untyped-def]
    for name, service in compose["services"].items():
        if "build" in service:
            args = _parser().parse_args(service["command"])
            if args.command == "run":
                assert args.service == name


def test_environment_is_valid_configuration(compose) -> None:  # type: ignore[no-untyped-def]
    for service in compose["services"].values():
        env = service.get("environment")
        if env and any(k.startswith("CRONHOOKS_") for k in env):
            settings = Settings.from_mapping({k: _interpolate(str(v)) for k, v in env.items()})
            assert settings.bind == "0.0.0.0"


def test_published_ports_match_the_contract(compose) -> None:  # type: ignore[no-untyped-def]
    ports = {name: s.get("ports", []) for name, s in compose["services"].items()}
    assert "8080:8080" in ports["admin-api"]
    assert "8081:8081" in ports["importer"]


def test_wheel_carries_migrations_and_schema(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("cronhooks-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for component in COMPONENTS:
        assert any(
            n.startswith(f"{component}/migrations/") and n.endswith(".sql") for n in names
        ), component
    assert "cronhooks_admin/graphql/schema.graphql" in names
