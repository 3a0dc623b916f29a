"""The herd: N webhooks whose next slot is the same instant, against a raw ceiling and an
in-memory APScheduler.

For each delivery, lag = agent receipt − slot. Also: makespan (slot → last receipt),
deliveries/s, duplicates and missing, and where the time goes (slot → requested →
first POST, from the event store), and a check that every slot was delivered exactly
once (the agent's receipts against the event store). In the same sitting, against the
same agent process (bench/agent.py) with the same concurrency:

* the ceiling: a plain aiohttp client posting the same N signed bodies;
* the peer: APScheduler 3.11 in memory (bench/apscheduler_peer.py, its own process), N
  date jobs due at one shared instant, each posting the same signed body.

With `replicas` > 1 the cluster runs that many processes of each service against one
database and vhost; every row carries the replica count.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version

import aiohttp
import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from bench import cpu, profile
from bench.common import CONCURRENCY, percentile, signed_delivery, table
from bench.harness import Cluster, free_port, running_cluster
from cronhooks_common.signing import SecretKeys, generate_secret

CREATE = """mutation($i: CreateCronWebhookInput!) { createCronWebhook(input: $i) { cronWebhook { id } } }"""
# CPU is read from this long before the slot: the burst, not the creation of the webhooks.
CPU_LEAD_SECONDS = 2.0
Received = dict[str, list[float]]  # delivery id → unix times the agent got it


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


async def sleep_until(at: float) -> None:
    await asyncio.sleep(max(0.0, at - time.time()))


async def start_agent() -> tuple[asyncio.subprocess.Process, str]:
    proc, [url] = await start_agents(1)
    return proc, url


async def start_agents(ports: int) -> tuple[asyncio.subprocess.Process, list[str]]:
    """One agent process (bench/agent.py) listening on `ports` ports: their base URLs."""
    chosen: list[int] = []
    while len(chosen) < ports:  # the OS may hand a just-closed port out again
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.agent", *map(str, chosen), env={**os.environ}
    )
    urls = [f"http://127.0.0.1:{port}" for port in chosen]
    async with aiohttp.ClientSession() as session:
        for _ in range(100):
            try:
                async with session.get(f"{urls[-1]}/stats") as resp:
                    if resp.status == 200:
                        return proc, urls
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    proc.terminate()
    raise RuntimeError("bench agent did not start")


async def received(session: aiohttp.ClientSession, url: str) -> Received:
    async with session.get(f"{url}/stats") as resp:
        return (await resp.json())["received"]  # type: ignore[no-any-return]


@dataclass
class Burst:
    """What the agent received of N deliveries due at one instant."""

    n: int
    lags: list[float]  # first receipt − instant, one per delivery id, seconds
    duplicates: int  # receipts beyond the first of a delivery id

    @classmethod
    def of(cls, got: Received, instant: float, n: int) -> Burst:
        return cls(
            n,
            [times[0] - instant for times in got.values()],
            sum(len(times) - 1 for times in got.values()),
        )

    @property
    def missing(self) -> int:
        return self.n - len(self.lags)

    @property
    def makespan(self) -> float:
        return max(self.lags) if self.lags else float("nan")

    @property
    def per_second(self) -> float:
        return len(self.lags) / self.makespan if self.lags else 0.0

    def cells(self) -> list[object]:
        """p50, p95, p99, makespan (ms), deliveries/s, duplicates, missing."""
        return [
            *(ms(percentile(self.lags, q)) for q in (50, 95, 99)),
            ms(self.makespan),
            f"{self.per_second:.0f}",
            self.duplicates,
            self.missing,
        ]


async def ceiling(session: aiohttp.ClientSession, agent: str, n: int) -> dict[str, float]:
    await session.post(f"{agent}/reset")
    keys = SecretKeys.of(generate_secret())
    sem = asyncio.Semaphore(CONCURRENCY)
    started = time.time()

    async def post(i: int) -> None:
        async with sem:
            body, headers = signed_delivery(keys, i, "schedule")
            async with session.post(f"{agent}/hook", data=body, headers=headers) as resp:
                await resp.read()

    cpu_before = cpu.own_ms()
    await asyncio.gather(*(post(i) for i in range(n)))
    client_ms = cpu.own_ms() - cpu_before
    got = await received(session, agent)
    last = max(t[0] for t in got.values())
    lags = [t[0] - started for t in got.values()]
    return {
        "makespan": last - started,
        "per_second": n / (last - started),
        # Building, signing and posting each body: a floor under any dispatcher's CPU.
        "cpu_ms_per_post": client_ms / n,
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
    }


async def create_webhooks(
    cluster: Cluster,
    session: aiohttp.ClientSession,
    n: int,
    url: str,
    schedule: str,
    **extra: object,
) -> None:
    """N webhooks on one schedule; `extra`: more input fields (the jitter herd's window)."""
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            body = await cluster.graphql(
                session,
                CREATE,
                {
                    "i": {
                        "url": url,
                        "cronSchedule": schedule,
                        "instruction": f"bench {i}",
                        "misfireGraceSeconds": 600,
                        **extra,
                    }
                },
                # Spread over the admin-api replicas, so each one takes writes.
                replica=i % cluster.replicas,
            )
            assert "errors" not in body, body

    await asyncio.gather(*(one(i) for i in range(n)))


async def breakdown(dsn: str) -> dict[str, float]:
    """Median stage times from the event store: slot → requested → first POST started."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("""
            with r as (
                select (data->>'delivery_id')::bigint id, (data->>'scheduled_for')::timestamptz slot,
                       recorded_at from eventstore.events where type = 'delivery.requested'),
            d as (
                select (data->>'delivery_id')::bigint id, (data->>'started_at')::timestamptz started,
                       recorded_at from eventstore.events where type = 'delivery.succeeded')
            select percentile_cont(0.5) within group (order by extract(epoch from r.recorded_at - r.slot)) requested,
                   percentile_cont(0.99) within group (order by extract(epoch from r.recorded_at - r.slot)) requested99,
                   percentile_cont(0.5) within group (order by extract(epoch from d.started - r.slot)) started,
                   percentile_cont(0.99) within group (order by extract(epoch from d.started - r.slot)) started99,
                   percentile_cont(0.5) within group (order by extract(epoch from d.recorded_at - r.slot)) recorded
            from r join d using (id)""")
        return {k: float(v or 0) * 1000 for k, v in dict(row).items()}
    finally:
        await conn.close()


@dataclass
class ExactlyOnce:
    """Every slot delivered once: the agent's receipts against the event store's
    first-attempt `delivery.requested` events."""

    n: int
    slots: int  # webhooks with a delivery requested for the shared slot
    requests: int  # first-attempt requests for the shared slot
    split: int  # webhooks with more than one delivery id for the slot
    elsewhere: int  # first-attempt requests for any other slot
    unreceived: int  # delivery ids in the store the agent never got
    unknown: int  # delivery ids the agent got that the store does not hold
    duplicates: int  # receipts beyond the first of a delivery id

    def holds(self) -> bool:
        return (self.slots, self.requests) == (self.n, self.n) and not (
            self.split or self.elsewhere or self.unreceived or self.unknown or self.duplicates
        )

    def cells(self) -> list[object]:
        return [
            self.slots,
            self.requests,
            self.split,
            self.elsewhere,
            self.unreceived,
            self.unknown,
            self.duplicates,
            "yes" if self.holds() else "**no**",
        ]


async def exactly_once(dsn: str, slot: datetime, got: Received, n: int) -> ExactlyOnce:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("""
            select (data->>'webhook_id')::bigint webhook_id, (data->>'delivery_id')::bigint id,
                   (data->>'scheduled_for')::timestamptz slot
            from eventstore.events
            where type = 'delivery.requested' and (data->>'attempt')::int = 1""")
    finally:
        await conn.close()
    ids_by_webhook: dict[int, set[int]] = {}
    for row in rows:
        if row["slot"] == slot:
            ids_by_webhook.setdefault(row["webhook_id"], set()).add(row["id"])
    stored = set().union(*ids_by_webhook.values())
    # The agent keys receipts by the body's id, which is the delivery id.
    got_ids = {int(k) for k in got}
    return ExactlyOnce(
        n=n,
        slots=len(ids_by_webhook),
        requests=sum(1 for row in rows if row["slot"] == slot),
        split=sum(1 for ids in ids_by_webhook.values() if len(ids) > 1),
        elsewhere=sum(1 for row in rows if row["slot"] != slot),
        unreceived=len(stored - got_ids),
        unknown=len(got_ids - stored),
        duplicates=sum(len(times) - 1 for times in got.values()),
    )


@dataclass
class CronhooksRun:
    burst: Burst
    stages: dict[str, float]
    cpu: dict[str, float]
    once: ExactlyOnce
    relay_leader: str  # the process that published during the burst (its CPU includes it)


def shared_slot(n: int) -> datetime:
    """One slot for all: a whole minute far enough ahead to create them all first."""
    lead = timedelta(seconds=70 + n * 0.012)
    return (datetime.now(UTC) + lead).replace(second=0, microsecond=0) + timedelta(minutes=1)


async def wait_for_receipts(
    session: aiohttp.ClientSession, agent: str, n: int, deadline: float
) -> None:
    while time.time() < deadline:
        if len(await received(session, agent)) >= n:
            return
        await asyncio.sleep(0.25)


async def cronhooks_burst(
    cluster: Cluster, session: aiohttp.ClientSession, agent: str, n: int
) -> CronhooksRun:
    slot = shared_slot(n)
    schedule = f"{slot.minute} {slot.hour} {slot.day} {slot.month} *"
    await create_webhooks(cluster, session, n, f"{agent}/hook", schedule)
    return await measured_burst(cluster, session, agent, slot, n, f"{n}")


async def measured_burst(
    cluster: Cluster,
    session: aiohttp.ClientSession,
    agent: str,
    slot: datetime,
    n: int,
    tag: str,
) -> CronhooksRun:
    """The slot's burst of `n` webhooks already created: CPU from CPU_LEAD_SECONDS before
    the slot to the last receipt at `agent` (whose /stats count every receipt), then the
    tables' figures."""
    await sleep_until(slot.timestamp() - CPU_LEAD_SECONDS)
    await session.post(f"{agent}/reset")
    async with profile.sampled(cluster.procs, tag):
        cpu_before = cpu.snapshot()
        await wait_for_receipts(session, agent, n, slot.timestamp() + 120)
        spent = cpu.spent_ms(cpu_before, cpu.snapshot())
    await asyncio.sleep(1.0)  # a late duplicate still counts
    got = await received(session, agent)
    return CronhooksRun(
        Burst.of(got, slot.timestamp(), n),
        await breakdown(cluster.dsn),
        spent,
        await exactly_once(cluster.dsn, slot, got, n),
        await relay_leader(cluster, session),
    )


async def relay_leader(cluster: Cluster, session: aiohttp.ClientSession) -> str:
    """Which process leads the relay (every process runs one; the first to take the lock
    publishes for all), read from each one's `cronhooks_relay_leader` gauge."""
    for name, port in cluster.ports.items():
        async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
            families = text_string_to_metric_families(await resp.text())
        if any(
            sample.name == "cronhooks_relay_leader" and sample.value == 1
            for family in families
            for sample in family.samples
        ):
            return name
    return "none"


@dataclass
class PeerRun:
    burst: Burst
    report: dict[str, float]  # the peer's own JSON line (bench/apscheduler_peer.py)
    cpu: dict[str, float]


def peer_instant(n: int) -> float:
    """A few seconds ahead: the peer's interpreter starts and all N jobs are added (about
    0.2 s for 10,000) before the CPU window opens, CPU_LEAD_SECONDS before the instant."""
    return time.time() + CPU_LEAD_SECONDS + 3.0 + n / 5000


async def apscheduler_burst(session: aiohttp.ClientSession, agent: str, n: int) -> PeerRun:
    await session.post(f"{agent}/reset")
    instant = peer_instant(n)
    peer = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.apscheduler_peer", agent, str(n), repr(instant)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ},
    )
    assert peer.stdin is not None and peer.stdout is not None
    try:
        await sleep_until(instant - CPU_LEAD_SECONDS)
        cpu_before = cpu.snapshot()
        # The peer prints when its last job is done, then holds until stdin closes, so
        # its CPU can still be read from /proc.
        line = await peer.stdout.readline()
        spent = cpu.spent_ms(cpu_before, cpu.snapshot())
    finally:
        peer.stdin.close()
        await peer.wait()
    if not line:
        raise RuntimeError(f"the APScheduler peer exited with {peer.returncode} and no result")
    got = await received(session, agent)
    return PeerRun(Burst.of(got, instant, n), json.loads(line), spent)


@dataclass
class HerdRun:
    n: int
    replicas: int
    ours: CronhooksRun
    ceiling: dict[str, float]
    peer: PeerRun


async def herd(n: int, replicas: int = 1) -> HerdRun:
    """cronhooks, then the ceiling, then the peer: one agent process, the cluster up
    (and idle) for all three."""
    proc, agent = await start_agent()
    try:
        async with (
            running_cluster(replicas=replicas) as cluster,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session,
        ):
            ours = await cronhooks_burst(cluster, session, agent, n)
            limit = await ceiling(session, agent, n)
            peer = await apscheduler_burst(session, agent, n)
    finally:
        proc.terminate()
        await proc.wait()
    return HerdRun(n, replicas, ours, limit, peer)


async def steady(n: int, minutes: int = 2) -> list[object]:
    """Steady load: N webhooks every minute (`* * * * *`) for a few minutes; lag of every
    delivery after the first minute (warm caches, keep-alive connections).

    Cron is minute-granular (CONTRACT §2), so a steady load of cron webhooks is a steady
    rate of minute slots: N deliveries due at every minute boundary, minute after minute."""
    proc, agent = await start_agent()
    try:
        async with (
            running_cluster() as cluster,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session,
        ):
            await create_webhooks(cluster, session, n, f"{agent}/hook", "* * * * *")
            first = (datetime.now(UTC) + timedelta(minutes=1)).replace(second=0, microsecond=0)
            slots = [first + timedelta(minutes=i) for i in range(1, minutes + 1)]
            await asyncio.sleep(max(0.0, (first - datetime.now(UTC)).total_seconds() + 20))
            await session.post(f"{agent}/reset")  # from here on: the measured minutes
            await asyncio.sleep(max(0.0, (slots[-1] - datetime.now(UTC)).total_seconds() + 30))
            got = await received(session, agent)
    finally:
        proc.terminate()
        await proc.wait()
    lags = []
    for times in got.values():
        for at in times:
            slot = max(s for s in slots if s.timestamp() <= at + 0.5)
            lags.append(at - slot.timestamp())
    expected = n * minutes
    return [
        n,
        minutes,
        len(lags),
        expected - len(lags),
        f"{percentile(lags, 50) * 1000:.0f}",
        f"{percentile(lags, 99) * 1000:.0f}",
        f"{max(lags) * 1000:.0f}",
    ]


def herd_row(r: HerdRun) -> list[object]:
    rate = r.ceiling["per_second"]
    return [
        r.n,
        r.replicas,
        *r.ours.burst.cells(),
        f"{rate:.0f}",
        f"{r.ours.burst.per_second / rate:.2f}",
    ]


def peer_row(r: HerdRun) -> list[object]:
    report, spent = r.peer.report, r.peer.cpu
    return [
        r.n,
        r.replicas,
        *r.peer.burst.cells(),
        report["missed"],
        report["failed"] + report["raised"],
        f"{report['ready_margin_s']:.1f}",
        f"{spent[cpu.PEER]:.0f}",
        f"{spent['agent']:.0f}",
    ]


def stage_row(r: HerdRun) -> list[object]:
    keys = ("requested", "requested99", "started", "started99", "recorded")
    return [r.n, r.replicas, *(f"{r.ours.stages[k]:.0f}" for k in keys)]


def cpu_row(r: HerdRun) -> list[object]:
    spent = r.ours.cpu
    total = sum(spent[role] for role in cpu.ROLES)
    return [
        r.n,
        r.replicas,
        *(f"{spent[role]:.0f}" for role in cpu.ROLES),
        f"{total / r.n:.2f}",
        r.ours.relay_leader,
    ]


def race_row(r: HerdRun) -> list[object]:
    ours, theirs, rate = r.ours.burst, r.peer.burst, r.ceiling["per_second"]
    # The agent is the same process getting the same bodies in both: left out of both.
    scheduling = sum(r.ours.cpu[role] for role in cpu.ROLES if role != "agent")
    return [
        r.n,
        r.replicas,
        ms(ours.makespan),
        ms(theirs.makespan),
        f"{ours.makespan / theirs.makespan:.1f}",
        f"{ours.per_second:.0f}",
        f"{rate:.0f}",
        f"{ours.per_second / rate:.2f}",
        f"{scheduling / r.n:.2f}",
        f"{r.peer.cpu[cpu.PEER] / r.n:.2f}",
        f"{r.ceiling['cpu_ms_per_post']:.2f}",
    ]


def once_row(r: HerdRun) -> list[object]:
    return [r.n, r.replicas, *r.ours.once.cells()]


LAGS = ["p50 ms", "p95 ms", "p99 ms", "makespan ms", "deliveries/s", "duplicates", "missing"]


def herd_sections(runs: list[HerdRun]) -> list[tuple[str, str]]:
    apscheduler = f"APScheduler {version('apscheduler')}"
    return [
        (
            "Herd: N webhooks, one slot (lag = agent receipt − slot)",
            table(
                ["N", "replicas", *LAGS, "ceiling /s (plain aiohttp)", "ratio"],
                [herd_row(r) for r in runs],
            ),
        ),
        (
            f"Herd: {apscheduler} in memory, N jobs due at one instant, same agent (lag = agent receipt − instant)",
            table(
                [
                    "N",
                    "replicas",
                    *LAGS,
                    "misfired",
                    "failed",
                    "jobs in, s before the instant",
                    "CPU ms, peer",
                    "CPU ms, agent",
                ],
                [peer_row(r) for r in runs],
            ),
        ),
        (
            "Herd: where the time goes (ms after the slot, from the event store)",
            table(
                [
                    "N",
                    "replicas",
                    "requested p50",
                    "requested p99",
                    "POST started p50",
                    "POST started p99",
                    "outcome recorded p50",
                ],
                [stage_row(r) for r in runs],
            ),
        ),
        (
            "Herd: CPU ms per process (replicas summed by role), from 2 s before the slot to the last receipt (/proc); the relay's leader also publishes every event",
            table(
                ["N", "replicas", *cpu.ROLES, "all, per delivery", "relay led by"],
                [cpu_row(r) for r in runs],
            ),
        ),
        (
            f"Herd: the race — cronhooks against {apscheduler} in memory and the plain aiohttp ceiling, same sitting (CPU without the agent)",
            table(
                [
                    "N",
                    "replicas",
                    "cronhooks makespan ms",
                    "APScheduler makespan ms",
                    "makespan cronhooks ÷ APScheduler",
                    "cronhooks deliveries/s",
                    "ceiling deliveries/s",
                    "cronhooks ÷ ceiling",
                    "CPU ms/delivery, cronhooks (services, postgres, rabbitmq)",
                    "CPU ms/delivery, APScheduler",
                    "CPU ms/POST, plain aiohttp client",
                ],
                [race_row(r) for r in runs],
            ),
        ),
        (
            "Herd: exactly once (agent receipts against the event store's first-attempt delivery.requested)",
            table(
                [
                    "N",
                    "replicas",
                    "slots requested",
                    "requests",
                    "slots with >1 delivery id",
                    "requests for other slots",
                    "stored ids not received",
                    "received ids not stored",
                    "duplicate receipts",
                    "exactly once",
                ],
                [once_row(r) for r in runs],
            ),
        ),
    ]


def steady_section(rows: list[list[object]]) -> tuple[str, str]:
    return (
        "Steady load: N webhooks every minute, lag of every delivery after a warm-up minute",
        table(["N", "minutes", "deliveries", "missing", "p50 ms", "p99 ms", "max ms"], rows),
    )


async def run(
    sizes: tuple[int, ...] = (1_000, 10_000),
    steady_sizes: tuple[int, ...] = (100, 1_000),
    replicas: int = 1,
) -> list[tuple[str, str]]:
    """The herd at each size (with its ceiling and APScheduler peer), then steady load.
    With replicas > 1 only the herd runs: steady load stays a one-replica measurement."""
    steady_rows = [await steady(n) for n in steady_sizes] if replicas == 1 else []
    runs = [await herd(n, replicas) for n in sizes]
    sections = herd_sections(runs)
    return [*sections, steady_section(steady_rows)] if replicas == 1 else sections
