"""docker-compose.yml and the image are kept correct by review and by these checks
(no Docker engine runs here)."""

from __future__ import annotations

import re
import shutil
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


def test_no_fixed_broker_password_no_open_dashboard_no_inherited_ssrf_switch(compose) -> None:  # type: ignore[no-untyped-def]
    """CONTRACT §15: compose publishes no broker port with a fixed password; the loopback
    switch `make up` writes into .env does not turn the SSRF guard off for Docker."""
    broker = compose["services"]["rabbitmq"]
    assert broker["environment"]["RABBITMQ_DEFAULT_PASS"].startswith("${BROKER_PASSWORD:?")
    for published in broker.get("ports", []):
        assert published.startswith("127.0.0.1:"), published
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        if "CRONHOOKS_AMQP_URL" in env:
            assert "${BROKER_PASSWORD:?" in env["CRONHOOKS_AMQP_URL"], name
        if "CRONHOOKS_ALLOW_PRIVATE_TARGETS" in env:
            assert "CRONHOOKS_ALLOW_PRIVATE_TARGETS" not in env["CRONHOOKS_ALLOW_PRIVATE_TARGETS"]
            assert _interpolate(env["CRONHOOKS_ALLOW_PRIVATE_TARGETS"]) == "false"


def test_every_service_has_a_readiness_healthcheck(compose) -> None:  # type: ignore[no-untyped-def]
    for name, service in compose["services"].items():
        if service.get("command", [None])[0] == "run":
            [check] = [" ".join(service["healthcheck"]["test"])]
            port = Settings.from_mapping({"CRONHOOKS_SECRET_KEY": "x" * 40}).port_of(name)
            assert f"127.0.0.1:{port}/readyz" in check, name


def test_make_env_writes_what_compose_needs(tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text((ROOT / "Makefile").read_text())
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "infra").mkdir()
    shutil.copy(ROOT / "infra/write-env", tmp_path / "infra/write-env")
    env = tmp_path / ".env"
    # An older .env: its values stay, what it lacks is added, it becomes 0600.
    env.write_text("CRONHOOKS_SECRET_KEY=" + "k" * 64)
    env.chmod(0o644)
    subprocess.run(["make", "-s", ".env"], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run(["make", "-s", ".env"], cwd=tmp_path, check=True, capture_output=True)
    assert oct(env.stat().st_mode & 0o777) == "0o600"
    pairs = [line.split("=", 1) for line in env.read_text().splitlines() if "=" in line]
    keys = [k for k, _ in pairs]
    assert sorted(keys) == ["BROKER_PASSWORD", "CRONHOOKS_SECRET_KEY", "POSTGRES_PASSWORD"]
    assert dict(pairs)["CRONHOOKS_SECRET_KEY"] == "k" * 64
    # Only secrets: the loopback allowance of `make up` must not reach docker compose.
    assert "CRONHOOKS_ALLOW_PRIVATE_TARGETS" not in keys
    Settings.from_env({}, env_file=env)  # and the services still accept it


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
