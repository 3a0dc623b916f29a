"""CPU time per process from /proc (Linux): where the CPU of a burst goes, by role."""

from __future__ import annotations

import os
import resource

ROLES = ("scheduler", "dispatcher", "admin-api", "importer", "postgres", "rabbitmq", "agent")
# Not a cronhooks process: counted on its own, never in the sums over ROLES.
PEER = "apscheduler"
Snapshot = dict[str, tuple[str, int]]  # pid → (role, CPU ticks user + system)


def _role(cmdline: str) -> str | None:
    for service in ("scheduler", "dispatcher", "admin-api", "importer"):
        if cmdline.endswith(f"run {service}"):
            return service
    if "bench.agent" in cmdline:
        return "agent"
    if "bench.apscheduler_peer" in cmdline:
        return PEER
    if cmdline.startswith("postgres") or os.path.basename(cmdline.split(" ")[0]) == "postgres":
        return "postgres"
    if "beam.smp" in cmdline or "rabbitmq" in cmdline:
        return "rabbitmq"
    return None


def snapshot() -> Snapshot:
    out: Snapshot = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        role = _role(cmdline)
        if role is not None:
            out[pid] = (role, int(fields[11]) + int(fields[12]))  # utime, stime
    return out


def spent_ms(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU ms per role between two snapshots (processes started in between count fully)."""
    hz = os.sysconf("SC_CLK_TCK")
    spent = dict.fromkeys((*ROLES, PEER), 0.0)
    for pid, (role, ticks) in after.items():
        earlier = before.get(pid)
        spent[role] += (ticks - (earlier[1] if earlier and earlier[0] == role else 0)) * 1000 / hz
    return spent


def own_ms() -> float:
    """CPU ms this (bench) process has used so far: what the plain client spends."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000
