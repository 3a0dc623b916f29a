"""A second `cronhooks up` on one machine while the first runs (issue 41: another clone's
`make up`): it says in one line which ports are taken and what to do, and starts nothing
— no traceback in a log file, no `make: *** Error 1` alone."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from cronhooks_common.settings import Settings
from tests.support.processes import free_port, up_until_it_stops, with_free_ports

pytestmark = pytest.mark.e2e


def listening(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


async def test_a_second_up_names_the_taken_ports_and_starts_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRONHOOKS_")},
        **with_free_ports(settings),
    }
    demo_port = free_port()
    first = [listening(int(env["CRONHOOKS_ADMIN_PORT"])), listening(demo_port)]
    try:
        code, out, err = await up_until_it_stops(
            env,
            tmp_path,
            "--demo-agent",
            "--demo-agent-port",
            str(demo_port),
            "--log-file",
            "up.log",
        )
    finally:
        for sock in first:
            sock.close()
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(
        f"cronhooks up: port {env['CRONHOOKS_ADMIN_PORT']} (admin-api), {demo_port} (demo agent)"
        " on 127.0.0.1 already in use: another cronhooks up is probably running"
    ), line
    assert "CRONHOOKS_ADMIN_PORT in .env" in line and "DEMO_AGENT_PORT=<port>" in line, line
    assert not (tmp_path / "up.log").exists()  # nothing started, nothing logged
