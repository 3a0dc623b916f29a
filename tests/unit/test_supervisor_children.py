"""`cronhooks up` restarts a child that exits, but not one that exits with a configuration
error (status 2): the same settings would fail the same way, one line each time."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from cronhooks_cli.supervisor import CONFIGURATION_ERROR, _child


async def test_a_misconfigured_child_is_not_restarted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = f"open({str(runs)!r}, 'a').write('x'); raise SystemExit({CONFIGURATION_ERROR})"
    stop = asyncio.Event()
    await asyncio.wait_for(_child([sys.executable, "-c", script], dict(os.environ), stop), 30)
    assert runs.read_text() == "x"
