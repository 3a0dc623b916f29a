"""Helpers of the destination-limit tests with dispatcher replicas as processes (CONTRACT
§17): an agent that records each request's interval and the client port it came from, and
which process holds a local port (from /proc, Linux), so a test can tell the requests of
one dispatcher replica from another's."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from tests.support.agent import Agent, Received

if TYPE_CHECKING:
    from tests.support.system import System


@dataclass
class Visit:
    path: str
    port: int  # the client's port: its connection, and so its dispatcher process
    started: float
    ended: float | None = None


@dataclass
class TimingAgent:
    """Answers 200 after `seconds` (or what `answers` says, by path, first); records visits."""

    seconds: float = 0.4
    answers: dict[str, list[int]] = field(default_factory=dict)  # path → statuses to give first
    retry_after: str = "120"
    agent: Agent = field(default_factory=Agent)
    visits: list[Visit] = field(default_factory=list)

    async def start(self) -> TimingAgent:
        self.agent.responder = self._answer
        await self.agent.start()
        return self

    async def stop(self) -> None:
        await self.agent.stop()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.agent.port}/{path}"

    async def _answer(self, request: web.Request, got: Received) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        visit = Visit(got.path, int(peer[1]) if peer else 0, time.time())
        self.visits.append(visit)
        pending = self.answers.get(got.path.lstrip("/"))
        if pending:
            visit.ended = time.time()
            return web.Response(status=pending.pop(0), headers={"Retry-After": self.retry_after})
        await asyncio.sleep(self.seconds)
        visit.ended = time.time()
        return web.json_response({"status": "ok"})

    def at(self, path: str) -> list[Visit]:
        return [v for v in self.visits if v.path == f"/{path}"]


def peak(visits: list[Visit]) -> int:
    """The most visits at the agent at one time."""
    edges = sorted(
        [(v.started, 1) for v in visits] + [(v.ended or float("inf"), -1) for v in visits],
        key=lambda e: (e[0], e[1]),  # an end before a start at the same instant
    )
    now = top = 0
    for _, step in edges:
        now += step
        top = max(top, now)
    return top


def ports_of(pid: int) -> set[int]:
    """The local TCP ports of process `pid`'s sockets (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


async def past_any_hold(system: System) -> None:
    """Move the test's clock past any destination hold (at most an hour): a property whose
    examples all aim at the one test agent holds it with every 429 or 503 + Retry-After,
    and the next example would wait for it (CONTRACT §17)."""
    _, got = await system.graphql(system.admin, "{ destinationHolds { heldUntil } }")
    if got["data"]["destinationHolds"]:
        system.clock.advance(timedelta(hours=1, seconds=1))
