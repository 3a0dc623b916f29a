"""Private Postgres and RabbitMQ servers for tests that stop or restart a server.

The machine's own servers (5432, 5672) are shared: other programs and other test runs use
them, and a restart would throw every one of them off. A test that needs a server to go
away gets servers of its own instead: a Debian Postgres cluster (pg_createcluster) with
its data under a temp dir, and a RabbitMQ node with its own name, ports and directories
(RABBITMQ_* variables, which rabbitmq-server and rabbitmqctl read), each on free ports.

`stopped_postgres` and `stopped_rabbitmq` create them without starting them (the
fresh-machine test has `infra/local-services` start them, as `make up` would);
`private_servers` starts both the same way, with the script, and stops them with its
`down` when done. Creating and starting needs root (the clusters and the node run as the
postgres and rabbitmq users).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
LOCAL_SERVICES = str(ROOT / "infra" / "local-services")
GUEST = {"Authorization": aiohttp.encode_basic_auth("guest", "guest")}


def has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def missing() -> str | None:
    """Why private servers cannot be made here (a reason to skip), or None."""
    if os.geteuid() != 0:
        return "private servers run as the postgres and rabbitmq users: needs root"
    if not shutil.which("pg_createcluster"):
        return "no pg_createcluster (Debian's postgresql-common)"
    if not shutil.which("rabbitmq-server") or not has_user("rabbitmq"):
        return "no Debian rabbitmq-server"
    return None


def _run(args: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")


@dataclass(frozen=True)
class StoppedPostgres:
    version: str
    name: str
    port: int


@contextlib.contextmanager
def stopped_postgres(base: Path | None = None) -> Iterator[StoppedPostgres]:
    """A private Debian Postgres cluster on a free port, created but not started; its data
    directory and log under `base` (a new temp dir when None). Dropped at the end."""
    version = sorted(os.listdir("/usr/lib/postgresql"), key=int)[-1]
    cluster = StoppedPostgres(version, f"cronhooks-test-{uuid.uuid4().hex[:8]}", free_port())
    with _private_dir("cronhooks-postgres-", "postgres", base) as where:
        _run(
            [
                "pg_createcluster", version, cluster.name, "--port", str(cluster.port),
                "--datadir", str(where / "data"), "--logfile", str(where / "postgres.log"),
                "--start-conf", "manual",
            ]
        )  # fmt: skip
        try:
            yield cluster
        finally:
            subprocess.run(["pg_dropcluster", "--stop", version, cluster.name], capture_output=True)


@dataclass(frozen=True)
class StoppedRabbitMQ:
    node: str
    port: int
    management_port: int | None
    env: dict[str, str]  # RABBITMQ_* for rabbitmq-server and rabbitmqctl


@contextlib.contextmanager
def stopped_rabbitmq(
    base: Path | None = None, *, management: bool = False
) -> Iterator[StoppedRabbitMQ]:
    """A private RabbitMQ node, not running: its own name, ports and directories under
    `base` (a new temp dir when None); with `management`, its management API on a port of
    its own. Stopped if running at the end, its directories removed."""
    with _private_dir("cronhooks-rabbitmq-", "rabbitmq", base) as where:
        for sub in ("mnesia", "log"):
            (where / sub).mkdir()
        node = f"cronhooks-test-{uuid.uuid4().hex[:8]}@localhost"
        port = free_port()
        management_port = free_port() if management else None
        # Its own config: the machine's may pin the listener to 5672 (Debian's does here).
        conf = [f"listeners.tcp.local = 127.0.0.1:{port}"]
        if management_port is not None:
            conf += ["management.tcp.ip = 127.0.0.1", f"management.tcp.port = {management_port}"]
        (where / "rabbitmq.conf").write_text("\n".join(conf) + "\n")
        plugins = "[rabbitmq_management]" if management else "[]"
        (where / "enabled_plugins").write_text(f"{plugins}.\n")
        for path in where.iterdir():
            shutil.chown(path, "rabbitmq")
        env = {
            "RABBITMQ_NODENAME": node,
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(where / "mnesia"),
            "RABBITMQ_LOG_BASE": str(where / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(where / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(where / "rabbitmq.conf"),
        }
        try:
            yield StoppedRabbitMQ(node, port, management_port, env)
        finally:
            subprocess.run(
                ["rabbitmqctl", "-n", node, "stop"], env={**os.environ, **env}, capture_output=True
            )


@contextlib.contextmanager
def _private_dir(prefix: str, owner: str, base: Path | None) -> Iterator[Path]:
    """A directory `owner` (the server's user) owns and can reach: not under pytest's
    tmp_path, which only root may enter."""
    parent = Path(tempfile.mkdtemp(prefix=prefix)) if base is None else base
    parent.chmod(0o755)
    where = parent / owner
    where.mkdir()
    shutil.chown(where, owner)
    try:
        yield where
    finally:
        shutil.rmtree(parent if base is None else where, ignore_errors=True)


@dataclass(frozen=True)
class PrivateServers:
    """Running private servers: what tests connect to, and how to restart each."""

    postgres: StoppedPostgres
    rabbitmq: StoppedRabbitMQ

    @property
    def pg_server(self) -> str:  # as tests/conftest.py's PG_SERVER: no database
        return f"postgresql://127.0.0.1:{self.postgres.port}"

    @property
    def amqp_server(self) -> str:  # no vhost
        return f"amqp://guest:guest@127.0.0.1:{self.rabbitmq.port}"

    @property
    def management_api(self) -> str:
        return f"http://127.0.0.1:{self.rabbitmq.management_port}/api"

    async def restart_postgres(self) -> None:
        await asyncio.to_thread(
            _run,
            [
                "pg_ctlcluster", "--skip-systemctl-redirect",
                self.postgres.version, self.postgres.name, "restart",
            ],
        )  # fmt: skip

    async def restart_rabbitmq(self) -> None:
        env = {**os.environ, **self.rabbitmq.env}
        for command in ("stop_app", "start_app"):
            await asyncio.to_thread(_run, ["rabbitmqctl", "-n", self.rabbitmq.node, command], env)


async def _local_services(*args: str, env: dict[str, str], cwd: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        LOCAL_SERVICES, *args, env=env, cwd=cwd, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise AssertionError(f"infra/local-services {args[0]}: {err.decode().strip()}")


async def _management_answers(api: str, within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    async with aiohttp.ClientSession(headers=GUEST) as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(f"{api}/overview") as r:
                    if r.status == 200:
                        return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the private RabbitMQ management API {api} did not answer")
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def private_servers() -> AsyncIterator[PrivateServers]:
    """A private Postgres and a private RabbitMQ (with its management API), started by
    `infra/local-services up` and stopped by its `down`, as `make up` and `make down` do."""
    base = Path(tempfile.mkdtemp(prefix="cronhooks-servers-"))
    try:
        with (
            stopped_postgres(base) as postgres,
            stopped_rabbitmq(base, management=True) as rabbitmq,
        ):
            servers = PrivateServers(postgres, rabbitmq)
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("CRONHOOKS_")},
                **rabbitmq.env,
                "CRONHOOKS_DATABASE_URL": f"{servers.pg_server}/postgres",
                "CRONHOOKS_AMQP_URL": f"{servers.amqp_server}/",
            }
            record = base / "started"
            try:
                await _local_services(
                    "up", "--trust-user", "--record", str(record), env=env, cwd=base
                )
                await _management_answers(servers.management_api, within=60)
                yield servers
            finally:
                if record.exists():
                    await _local_services("down", "--record", str(record), env=env, cwd=base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
