"""CONTRACT §12 "A fresh machine": `make up` where Postgres and RabbitMQ are not running
starts them (infra/local-services), goes on to a delivered demo webhook, and `make down`
stops what it started and nothing else.

The machine's shared servers (5432, 5672) serve the other tests and are never stopped:
the stopped servers here are a private Postgres cluster (pg_createcluster) and a private
RabbitMQ node (own name, ports and directories), each on a free port
(tests/support/servers.py, which the fault suite starts the same way). Where a server
cannot be started or installed, the script's answer is one line naming what to run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SECRET_KEY
from tests.support import quick_start, servers
from tests.support.inprocess import eventually
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "infra" / "local-services")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="starts system servers: needs root")


def _answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def stopped_postgres() -> Iterator[int]:
    """A private Debian Postgres cluster on a free port, created but not started."""
    if not shutil.which("pg_createcluster"):
        pytest.skip("no pg_createcluster (Debian's postgresql-common)")
    with servers.stopped_postgres() as cluster:
        yield cluster.port


@pytest.fixture
def stopped_rabbitmq() -> Iterator[tuple[int, dict[str, str]]]:
    """A private RabbitMQ node: its own name, ports and directories (RABBITMQ_* variables,
    which rabbitmq-server and rabbitmqctl read), not running."""
    if not shutil.which("rabbitmq-server") or not servers.has_user("rabbitmq"):
        pytest.skip("no Debian rabbitmq-server")
    with servers.stopped_rabbitmq() as node:
        yield node.port, node.env


async def _script(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        SCRIPT, *args, env=env, cwd=cwd, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    return proc.returncode or 0, err.decode()


@ROOT_ONLY
async def test_with_both_servers_stopped_make_up_starts_them_delivers_the_demo_and_make_down_stops_only_them(
    stopped_postgres: int, stopped_rabbitmq: tuple[int, dict[str, str]], tmp_path: Path
) -> None:
    pg_port, (amqp_port, rabbit_env) = stopped_postgres, stopped_rabbitmq
    assert not _answers(pg_port) and not _answers(amqp_port)
    ports = {name: free_port() for name in ("ADMIN", "IMPORTER", "SCHEDULER", "DISPATCHER")}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRONHOOKS_")},
        **rabbit_env,
        **{f"CRONHOOKS_{name}_PORT": str(port) for name, port in ports.items()},
        "CRONHOOKS_SECRET_KEY": SECRET_KEY,
        "CRONHOOKS_DATABASE_URL": f"postgresql://127.0.0.1:{pg_port}/cronhooks",
        "CRONHOOKS_AMQP_URL": f"amqp://guest:guest@127.0.0.1:{amqp_port}/",
        "CRONHOOKS_PUBLIC_URL": f"http://127.0.0.1:{ports['ADMIN']}",
        "CRONHOOKS_API_PUBLIC_URL": f"http://127.0.0.1:{ports['IMPORTER']}",
        "CRONHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # as `make up` sets it
        "CRONHOOKS_LOG_FORMAT": "console",
    }
    record = tmp_path / ".cronhooks-started"
    # What `make up` runs: the script, then `cronhooks up` recorded by its pid.
    code, err = await _script("up", "--trust-user", "--record", str(record), env=env, cwd=tmp_path)
    assert code == 0, err
    assert _answers(pg_port) and _answers(amqp_port)
    started = record.read_text().splitlines()
    assert [line.split()[0] for line in started] == ["postgres", "rabbitmq"], started
    assert started[1] == f"rabbitmq {rabbit_env['RABBITMQ_NODENAME']}"

    up = await quick_start.start(env, tmp_path, free_port())
    with record.open("a") as out:
        out.write(f"cronhooks-up {up.proc.pid}\n")
    try:
        assert up.demo_webhook()[1], "created by this run"

        async def delivered() -> str | None:
            body = await quick_start.curl_json(up.curl_after("Its deliveries:"))
            statuses = [d["status"] for d in body["data"]["cronWebhookDeliveries"]]
            return statuses[0] if statuses and statuses[0] != "pending" else None

        assert await eventually(delivered, timeout=30, interval=0.2) == "success"
        # A second `make up` while this one runs is refused in one line.
        code, err = await _script("up", "--record", str(record), env=env, cwd=tmp_path)
        assert code == 1 and err.strip().endswith("`make down` first"), err
    finally:
        # `make down`: cronhooks up first (it drains), then the servers it started.
        code, err = await _script("down", "--record", str(record), env=env, cwd=tmp_path)
        if up.proc.returncode is None:
            up.proc.kill()
    assert code == 0, err
    assert await asyncio.wait_for(up.proc.wait(), 5) == 0
    assert not _answers(pg_port) and not _answers(amqp_port), err
    assert not record.exists()
    assert _answers(5432) and _answers(5672), "the machine's shared servers keep running"


def _bare_path(tmp_path: Path) -> str:
    """A PATH with the basic tools the script uses and no server, apt-get or sudo."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "sed", "tail", "seq", "sleep", "id", "hostname", "stat",
                 "awk", "ps", "grep", "tac", "rm", "cat"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


@pytest.mark.parametrize("missing", ["postgres", "rabbitmq"])
async def test_where_a_server_can_be_neither_started_nor_installed_it_says_in_one_line_what_to_run(
    missing: str, tmp_path: Path
) -> None:
    nothing = free_port()  # nothing listens there
    env = {
        "PATH": _bare_path(tmp_path),
        "CRONHOOKS_DATABASE_URL": f"postgresql://127.0.0.1:{nothing if missing == 'postgres' else 5432}/cronhooks",
        "CRONHOOKS_AMQP_URL": f"amqp://guest:guest@127.0.0.1:{nothing if missing == 'rabbitmq' else 5672}/",
    }
    record = tmp_path / "started"
    code, err = await _script("up", "--record", str(record), env=env, cwd=tmp_path)
    assert code == 1
    [hint] = [line for line in err.splitlines() if line.startswith("cronhooks: ")]
    assert ("Postgres" if missing == "postgres" else "RabbitMQ") in hint
    assert f":{nothing}" in hint and "docker compose up" in hint, hint
    assert not record.exists(), "nothing was started"


async def test_a_malformed_address_is_named(tmp_path: Path) -> None:
    env = {"PATH": _bare_path(tmp_path), "CRONHOOKS_DATABASE_URL": "127.0.0.1:5432"}
    code, err = await _script("up", env=env, cwd=tmp_path)
    assert code == 1 and "CRONHOOKS_DATABASE_URL" in err, err


def test_make_up_runs_the_script_then_cronhooks_up_and_make_down_the_script() -> None:
    """The recipes the test above follows are the Makefile's (`make -n` prints them)."""
    up = subprocess.run(["make", "-n", "-W", "pyproject.toml", "up"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "infra/local-services up --trust-user --record .cronhooks-started" in up
    assert 'echo "cronhooks-up $$" >> .cronhooks-started' in up
    assert "cronhooks up --demo-agent" in up
    assert f"--log-file {quick_start.LOG_FILE}" in up  # what the quick-start test runs
    down = subprocess.run(["make", "-n", "down"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "infra/local-services down --record .cronhooks-started" in down
