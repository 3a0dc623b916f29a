"""The ports `cronhooks up` is about to listen on, checked before it starts anything.

A second `cronhooks up` on one machine (another clone's `make up` while the first still
runs) would otherwise start its services, see them fail to bind one by one, and leave a
traceback in its log file; instead it says in one line which ports are taken and what to
do, and migrates, consumes and binds nothing.
"""

from __future__ import annotations

import socket

from cronhooks_common.settings import PREFIX, Settings

SERVICE_PORTS = {  # service → the setting of its port
    "admin-api": "admin_port",
    "importer": "importer_port",
    "scheduler": "scheduler_port",
    "dispatcher": "dispatcher_port",
}


def wanted(settings: Settings, demo_agent_port: int | None) -> dict[str, int]:
    """What listens where: each service's port, and the demo agent's when it runs."""
    ports = {name: int(getattr(settings, field)) for name, field in SERVICE_PORTS.items()}
    if demo_agent_port is not None:
        ports["demo agent"] = demo_agent_port
    return ports


def taken(host: str, ports: dict[str, int]) -> dict[str, int]:
    """The ones something else listens on. The probe binds as the servers will (asyncio
    sets SO_REUSEADDR), so a port left in TIME_WAIT by a stopped server is free."""
    busy = {}
    for name, port in ports.items():
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                busy[name] = port
    return busy


def taken_line(host: str, busy: dict[str, int]) -> str:
    """One line: the taken ports, the likely cause, the two ways out."""
    named = ", ".join(f"{port} ({name})" for name, port in busy.items())
    settings = ", ".join(
        f"{PREFIX}{field.upper()}" for name, field in SERVICE_PORTS.items() if name in busy
    )
    choose = [settings + " in .env"] if settings else []
    if "demo agent" in busy:
        choose.append("make up DEMO_AGENT_PORT=<port>")
    return (
        f"cronhooks up: port {named} on {host} already in use: another cronhooks up is "
        "probably running (Ctrl-C in its terminal or `make down` in its directory stops it), "
        f"or choose free ports ({'; '.join(choose)})"
    )
