"""py-spy on every service process over a measured window, when asked for.

Set BENCH_PROFILE_DIR to a directory (not a CRONHOOKS_ name: the services refuse
variables of theirs they do not know) and each herd writes one collapsed-stack file per
process (`<process>-<N>.txt`, py-spy's raw format, 100 Hz, idle excluded) covering the
same window as the CPU figures: the slot's lead to the last receipt. Off by default:
sampling costs the sampled processes a few per cent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

PROFILE_DIR = os.environ.get("BENCH_PROFILE_DIR")


@asynccontextmanager
async def sampled(procs: Mapping[str, asyncio.subprocess.Process], tag: str) -> AsyncIterator[None]:
    # py-spy beside this interpreter (the venv's), else on PATH.
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if not PROFILE_DIR or py_spy is None:
        yield
        return
    out = Path(PROFILE_DIR)
    out.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (instant, before the window)
    samplers = [
        await asyncio.create_subprocess_exec(
            py_spy,
            "record",
            "--nonblocking",
            "-r",
            "100",
            "-f",
            "raw",
            "-p",
            str(proc.pid),
            "-o",
            str(out / f"{name}-{tag}.txt"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for name, proc in procs.items()
    ]
    try:
        yield
    finally:
        for sampler in samplers:
            sampler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for sampler in samplers:
            await sampler.wait()
