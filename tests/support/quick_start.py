"""Run `cronhooks up --demo-agent --print-token` (what `make up` runs) and read what it
prints, for the quick-start and fresh-machine tests."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

LOG_FILE = "cronhooks-up.log"  # as the Makefile names it


@dataclass
class QuickStart:
    proc: asyncio.subprocess.Process
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def curl_after(self, heading: str) -> str:
        """The curl printed on the line after `heading`."""
        at = self.lines.index(heading)
        assert self.lines[at + 1].startswith("  curl "), self.lines[at + 1]
        return self.lines[at + 1].strip()

    def demo_webhook(self) -> tuple[int, bool]:
        """(id, created by this run) of the demo webhook it reports."""
        [(hook, state)] = re.findall(
            r"^Demo webhook (\d+), every 5 minutes[^:]*: (.*)$", self.text, re.M
        )
        return int(hook), state.startswith("created")

    def browser_urls(self) -> list[str]:
        """The URLs it prints on lines of their own (not inside a printed command)."""
        return [
            url
            for line in self.lines
            if not line.lstrip().startswith("curl ")
            for url in re.findall(r"https?://[^\s'\"]+", line)
        ]

    async def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(self.proc.wait(), 60)


async def start(env: dict[str, str], cwd: Path, demo_port: int) -> QuickStart:
    """Start it and wait for the quick start (it ends with the `Stop:` line)."""
    proc = await asyncio.create_subprocess_exec(
        Path(sys.executable).parent / "cronhooks",
        "up",
        "--demo-agent",
        "--demo-agent-port",
        str(demo_port),
        "--print-token",
        "--log-file",
        LOG_FILE,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,  # the terminal of `make up`: both
    )
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(90):
        while not lines or not lines[-1].startswith("Stop:"):
            line = (await proc.stdout.readline()).decode()
            assert line, "cronhooks up ended before printing the quick start:\n" + "".join(lines)
            lines.append(line.rstrip("\n"))
    return QuickStart(proc, lines)


async def shell(command: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd, env=env
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"{command}: {err.decode()}"
    return out.decode()


async def curl_json(command: str) -> dict:  # type: ignore[type-arg]
    body = json.loads(await shell(command))
    assert "errors" not in body, body
    return body  # type: ignore[no-any-return]
