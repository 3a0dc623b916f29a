"""An agent's jobs on cronhooks' managed one-shot triggers, so the agent may sleep.

Each job has a next fire time (a cron expression, an interval, or one instant) and an
optional `repeat` count. `start()` reconciles the armed triggers with the jobs. A fire
(through `fire_handler`, whose `run` is `scheduler.run`) runs the job, computes its next
time and reconciles again: recurring jobs re-arm, finished ones are cancelled.

If the platform rejects the agent's token for good (401, or 403 `invalid_client`), the
scheduler logs one warning and runs the jobs itself with an in-process ticker for the rest
of the process' life. Transient failures (5xx, transport) just wait for the next reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog

from cronhooks_agent.client import AuthRejected, CronClient, Diff, PlatformUnavailable
from cronhooks_common.clock import wait_set
from cronhooks_common.cron import CronSchedule

log = structlog.get_logger(__name__)

Work = Callable[[], Awaitable[None]]


@dataclass
class Job:
    id: str
    work: Work
    cron: str | None = None
    timezone: str = "UTC"
    every: timedelta | None = None
    at: datetime | None = None
    repeat: int | None = None  # stop after this many runs
    runs: int = 0
    next_at: datetime | None = None

    def advance(self, after: datetime) -> None:
        """Set `next_at` to the next fire after `after` (None: the job is finished)."""
        if self.repeat is not None and self.runs >= self.repeat:
            self.next_at = None
        elif self.cron is not None:
            self.next_at = CronSchedule.parse(self.cron, self.timezone).next_after(after)
        elif self.every is not None:
            self.next_at = after + self.every
        else:
            self.next_at = self.at if self.runs == 0 and self.at is not None else None


class AgentScheduler:
    def __init__(
        self,
        client: CronClient,
        callback_url: str,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client = client
        self._callback_url = callback_url
        self._now = now
        self.jobs: dict[str, Job] = {}
        self.degraded = False  # True once the platform refused us: local ticker instead
        self._ticker: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def add(self, job: Job) -> None:
        job.advance(self._now())
        self.jobs[job.id] = job

    def desired(self) -> dict[str, datetime]:
        return {j.id: j.next_at for j in self.jobs.values() if j.next_at is not None}

    async def start(self) -> Diff | None:
        return await self.reconcile()

    async def reconcile(self) -> Diff | None:
        if self.degraded:
            self._wake.set()
            return None
        try:
            diff = await self._client.reconcile(self.desired(), self._callback_url)
        except AuthRejected as exc:
            log.warning(
                "managed_cron_refused",
                error=str(exc),
                fix="give the agent a valid cronhooks agent token (createAgent / rotateAgentToken)",
                fallback="in-process ticker",
            )
            self.degraded = True
            self._ticker = asyncio.create_task(self._tick())
            return None
        except PlatformUnavailable as exc:
            log.info("managed_cron_unavailable", error=str(exc))  # the next reconcile retries
            return None
        log.info(
            "managed_cron_reconciled",
            armed=diff.armed,
            rearmed=diff.rearmed,
            cancelled=diff.cancelled,
        )
        return diff

    async def run(self, job_id: str, fire_at: str) -> None:
        """Run a job for one fire (the `run` of `fire_handler`), then re-arm."""
        job = self.jobs.get(job_id)
        if job is None:
            log.warning("fire_for_unknown_job", job_id=job_id)
            await self.reconcile()  # cancels the orphan
            return
        await self._run_job(job)
        await self.reconcile()

    async def _run_job(self, job: Job) -> None:
        job.runs += 1
        try:
            await job.work()
        finally:
            job.advance(max(self._now(), job.next_at or self._now()))

    async def _tick(self) -> None:
        """The fallback: sleep until the earliest job, run what is due, repeat."""
        while True:
            self._wake.clear()
            now = self._now()
            for job in list(self.jobs.values()):
                if job.next_at is not None and job.next_at <= now:
                    await self._run_job(job)
            upcoming = [j.next_at for j in self.jobs.values() if j.next_at is not None]
            delay = (
                60.0 if not upcoming else max(0.0, (min(upcoming) - self._now()).total_seconds())
            )
            await wait_set(self._wake, min(delay, 60.0))  # a stop's cancel ends it

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
