"""The herd's in-memory APScheduler peer: `python -m bench.apscheduler_peer AGENT N AT`.

N date jobs due at one instant AT (unix seconds) in APScheduler 3.11's AsyncIOScheduler,
with its default memory job store and asyncio executor. Each job POSTs a signed delivery
body (bench.common.signed_delivery, as the ceiling does) to AGENT/hook through one shared
aiohttp session with the ceiling's connection limit. It is its own process, like the
agent, so that /proc shows its CPU apart (bench/cpu.py) and it shares no event loop with
the bench.

Prints one JSON line once every job has run (or AT + 5 min has passed), then waits for
stdin to close before exiting, so the bench reads its CPU while it is still alive. Lag is
not measured here: the bench takes it from the agent's receipts, as for cronhooks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime

import aiohttp
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bench.common import CONCURRENCY, signed_delivery
from cronhooks_common.signing import SecretKeys, generate_secret

# An hour of grace: a job that starts late is still run (and its lag shows it), never
# dropped as misfired, which would make a slow run look fast.
MISFIRE_GRACE_SECONDS = 3600
GIVE_UP_AFTER_SECONDS = 300


class Tally:
    """How the jobs ended, and an event set when all N have (run, failed or missed)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.outcomes: Counter[str] = Counter()
        self.all_settled = asyncio.Event()

    def note(self, outcome: str) -> None:
        self.outcomes[outcome] += 1
        if self.outcomes.total() >= self.n:
            self.all_settled.set()

    def on_event(self, event: JobExecutionEvent) -> None:
        self.note("missed" if event.code == EVENT_JOB_MISSED else "raised")


def scheduler_with_jobs(
    session: aiohttp.ClientSession, agent: str, n: int, at: float, tally: Tally
) -> AsyncIOScheduler:
    keys = SecretKeys.of(generate_secret())

    async def deliver(i: int) -> None:
        # Signed when the job runs, as the dispatcher and the ceiling sign per request.
        body, headers = signed_delivery(keys, i, "schedule")
        try:
            async with session.post(f"{agent}/hook", data=body, headers=headers) as resp:
                await resp.read()
        except aiohttp.ClientError:
            tally.note("failed")
            return
        tally.note("ok" if resp.status == 200 else "failed")

    scheduler = AsyncIOScheduler(timezone=UTC)
    scheduler.add_listener(tally.on_event, EVENT_JOB_MISSED | EVENT_JOB_ERROR)
    run_date = datetime.fromtimestamp(at, UTC)
    # Added before start(): the scheduler takes them all in one go instead of waking
    # up once per add_job.
    for i in range(n):
        scheduler.add_job(
            deliver, "date", run_date=run_date, args=[i], misfire_grace_time=MISFIRE_GRACE_SECONDS
        )
    return scheduler


async def race(agent: str, n: int, at: float) -> dict[str, object]:
    tally = Tally(n)
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        scheduler = scheduler_with_jobs(session, agent, n, at, tally)
        scheduler.start()
        # Negative if the jobs were not all in before the instant: then the lags are unfair.
        ready_margin = at - time.time()
        give_up = max(0.0, at + GIVE_UP_AFTER_SECONDS - time.time())
        # On time-out, the tally shows fewer than n settled.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tally.all_settled.wait(), give_up)
        settled_at = time.time()
        scheduler.shutdown(wait=False)
    return {
        "n": n,
        "ready_margin_s": round(ready_margin, 3),
        "settled_at": settled_at,
        **{k: tally.outcomes[k] for k in ("ok", "failed", "missed", "raised")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.apscheduler_peer")
    parser.add_argument("agent", help="the bench agent's base URL")
    parser.add_argument("n", type=int, help="jobs")
    parser.add_argument("at", type=float, help="the shared instant, unix seconds")
    args = parser.parse_args()
    result = asyncio.run(race(args.agent, args.n, args.at))
    print(json.dumps(result), flush=True)
    sys.stdin.read()  # hold on until the bench has taken its CPU snapshot


if __name__ == "__main__":
    main()
