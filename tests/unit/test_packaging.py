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

from cronhooks_cli.cli import _parser
from cronhooks_common.migrate import components
from cronhooks_common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def _interpolate(value: str, env: dict[str, str] | None = None) -> str:
    # ${VAR:-default} → env[VAR] or default, ${VAR:?msg} → a valid stand-in
    given = env or {}
    value = re.sub(
        r"\$\{([A-Z_]+):-([^}]*)\}", lambda m: given.get(m.group(1)) or m.group(2), value
    )
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


def test_published_ports_match_the_contract_and_replicas_can_be_added(compose) -> None:  # type: ignore[no-untyped-def]
    """8080/8081 are the proxy's; no other service has a host port or a container_name, so
    `docker compose up --scale <service>=N` never collides."""
    services = compose["services"]
    assert {_interpolate(p) for p in services["proxy"]["ports"]} == {"8080:8080", "8081:8081"}
    for name, service in services.items():
        assert "container_name" not in service, name
        if name != "proxy":
            assert not service.get("ports"), f"{name} publishes a host port"
    conf = (ROOT / "infra/nginx.conf").read_text()
    mounted = [v.split(":")[0] for v in services["proxy"]["volumes"]]
    assert "./infra/nginx.conf" in mounted
    listens = re.findall(r"listen (\d+);", conf)
    assert sorted(listens) == ["8080", "8081"]
    targets = re.findall(r"set \$\w+ http://([\w-]+):(\d+);", conf)
    assert targets == [("admin-api", "8080"), ("importer", "8081")]
    for service, port in targets:
        assert port in services[service]["expose"], service


def test_no_fixed_password_no_broker_port_no_inherited_ssrf_switch(compose) -> None:  # type: ignore[no-untyped-def]
    """CONTRACT §15: compose publishes no broker port and has no fixed password (both come
    from .env); the loopback switch of `make up` does not turn the SSRF guard off here."""
    services = compose["services"]
    assert not services["rabbitmq"].get("ports"), "no broker port published"
    assert services["rabbitmq"]["environment"]["RABBITMQ_DEFAULT_PASS"].startswith(
        "${BROKER_PASSWORD:?"
    )
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?"
    )
    for name, service in services.items():
        env = service.get("environment", {})
        if "CRONHOOKS_AMQP_URL" in env:
            assert "${BROKER_PASSWORD:?" in env["CRONHOOKS_AMQP_URL"], name
        if "CRONHOOKS_DATABASE_URL" in env:
            assert "${POSTGRES_PASSWORD:?" in env["CRONHOOKS_DATABASE_URL"], name
        if "CRONHOOKS_SECRET_KEY" in env:  # a cronhooks service: the guard is stated, off
            allow = env["CRONHOOKS_ALLOW_PRIVATE_TARGETS"]
            assert "CRONHOOKS_ALLOW_PRIVATE_TARGETS" not in allow, name
            assert _interpolate(allow) == "false", name
        assert "env_file" not in service, f"{name} would take all of .env"


def test_the_admin_token_command_it_documents_is_a_valid_invocation(compose) -> None:  # type: ignore[no-untyped-def]
    text = (ROOT / "docker-compose.yml").read_text()
    [command] = re.findall(r"docker compose exec admin-api cronhooks (admin create-token .*)", text)
    args = _parser().parse_args(command.split())
    assert (args.command, args.admin_command) == ("admin", "create-token")
    assert "admin-api" in compose["services"]


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
    assert len(components()) == 5
    for component in components():
        assert any(
            n.startswith(f"{component}/migrations/") and n.endswith(".sql") for n in names
        ), component
    assert "cronhooks_admin/graphql/schema.graphql" in names


def test_public_urls_and_ports_come_from_env_with_todays_defaults(compose) -> None:  # type: ignore[no-untyped-def]
    """Agents on other hosts need an api_url they can reach: compose takes the public URLs
    and published ports from .env (COMPOSE_*, which `make up` does not read)."""
    env = compose["x-cronhooks"]["environment"]
    proxy = compose["services"]["proxy"]["ports"]
    defaults = Settings.from_mapping({k: _interpolate(str(v)) for k, v in env.items()})
    assert defaults.public_url == "http://localhost:8080"
    assert defaults.api_public_url == "http://localhost:8081"
    dotenv = {
        "COMPOSE_PUBLIC_URL": "https://cron.example.com",
        "COMPOSE_API_PUBLIC_URL": "https://notes.example.com",
        "COMPOSE_ADMIN_PORT": "18080",
        "COMPOSE_API_PORT": "18081",
    }
    given = Settings.from_mapping({k: _interpolate(str(v), dotenv) for k, v in env.items()})
    assert given.public_url == "https://cron.example.com"
    assert given.api_public_url == "https://notes.example.com"
    assert {_interpolate(p, dotenv) for p in proxy} == {"18080:8080", "18081:8081"}
    for service in compose["services"].values():
        for name in service.get("environment", {}):
            assert not str(name).startswith("COMPOSE_"), "COMPOSE_* are compose's own"


def test_the_broker_tls_override_publishes_the_tls_port_only() -> None:
    override = yaml.safe_load((ROOT / "infra/compose-broker-tls.yml").read_text())
    assert set(override["services"]) == {"rabbitmq"}
    rabbitmq = override["services"]["rabbitmq"]
    assert [_interpolate(p) for p in rabbitmq["ports"]] == ["5671:5671"]
    assert [_interpolate(p, {"COMPOSE_BROKER_TLS_PORT": "15671"}) for p in rabbitmq["ports"]] == [
        "15671:5671"
    ]
    mounts = dict(_interpolate(v).split(":")[:2] for v in rabbitmq["volumes"])
    conf = mounts["./infra/rabbitmq-tls.conf"]
    assert conf.startswith("/etc/rabbitmq/conf.d/")
    text = (ROOT / "infra/rabbitmq-tls.conf").read_text()
    assert "listeners.ssl.default = 5671" in text
    assert mounts["./broker-tls"] == "/etc/rabbitmq/tls"  # COMPOSE_BROKER_TLS_DIR's default
    for name in ("cacertfile", "certfile", "keyfile"):
        assert re.search(rf"ssl_options\.{name} = /etc/rabbitmq/tls/\S+", text), name
    text = (ROOT / "docker-compose.yml").read_text()
    assert "COMPOSE_FILE=docker-compose.yml:infra/compose-broker-tls.yml" in text
