"""importer service: owns the note store and serves the agent token API.

In this version it runs the shared service frame (health, readiness, metrics, outbox
relay); the note store and the token API arrive with their issue.
"""

from __future__ import annotations

from cronhooks_common.service import Runtime


class Importer:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


async def bootstrap(runtime: Runtime) -> Importer:
    return Importer(runtime)
