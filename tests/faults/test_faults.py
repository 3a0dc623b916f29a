"""The fault suite (`make test-faults`; part of `make test`): during a herd of about 1,100
deliveries, kill -9 each service and restart it, restart RabbitMQ, restart Postgres, and
run three schedulers at once. After each: every slot requested once with one delivery id,
every delivery done at least once, every event of the store published, every note written.

Each scenario prints one row of the table in the closing note of the fault-suite issue.
The servers restarted are the suite's own (tests/faults/conftest.py), never the machine's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import aio_pika
import asyncpg
import pytest
from aiohttp import web

from cronhooks_common import broker
from cronhooks_common.settings import Settings
from tests.support.agent import Agent, Received
from tests.support.processes import ARTIFACTS, Cluster, cluster, free_port
from tests.support.servers import PrivateServers

pytestmark = pytest.mark.faults

WEBHOOKS = 100
BACKLOG_MINUTES = 10  # every webhook has 11 due slots: ~1,100 deliveries
TABLE = ARTIFACTS / "fault-table.md"


@dataclass
class Herd:
    c: Cluster
    agent: Agent
    start: datetime
    servers: PrivateServers
    events: set[str] = field(default_factory=set)  # event ids seen by our own subscriber
    fault_at: float = 0.0
    first_after_fault: float | None = None


async def answer_with_a_note(request: web.Request, _: Received) -> web.StreamResponse:
    body = await request.json()
    return web.json_response(
        {
            "status": "ok",
            "changes": [
                {
                    "path": f"herd/{body['id']}.md",
                    "content": f"delivery {body['id']}",
                    "expected_hash": "",
                }
            ],
        }
    )


async def subscribe(amqp_url: str, seen: set[str]) -> aio_pika.abc.AbstractRobustConnection:
    """Our own durable queue on every event, surviving broker restarts."""
    conn = await broker.connect(amqp_url, name="fault-subscriber")
    channel = await conn.channel()
    exchange = await broker.declare_exchange(channel)
    queue = await channel.declare_queue("fault-test-all-events", durable=True)
    await queue.bind(exchange, routing_key="#")

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        seen.add(str(message.message_id))
        await message.ack()

    await queue.consume(on_message)
    return conn


async def db(dsn: str) -> asyncpg.Connection:
    for _ in range(200):
        try:
            return await asyncpg.connect(dsn)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            await asyncio.sleep(0.1)
    raise AssertionError("database did not come back")


async def start_herd(c: Cluster, settings: Settings, agent: Agent, servers: PrivateServers) -> Herd:
    token = (await c.cli("admin", "create-token", "--name", "faults")).split()[-1]
    for i in range(WEBHOOKS):
        body = await c.graphql(
            token,
            """mutation($i: CreateCronWebhookInput!) {
            createCronWebhook(input: $i) { cronWebhook { id } } }""",
            {
                "i": {
                    "url": agent.url,
                    "cronSchedule": "* * * * *",
                    "catchUpPolicy": "ALL",
                    "misfireGraceSeconds": 7 * 86400,
                    "writePatterns": ["herd/*"],
                    "maxRetries": 5,
                    "instruction": f"fault herd {i}",
                }
            },
        )
        assert "errors" not in body, body
    conn = await db(settings.database_url)
    try:
        for _ in range(300):
            if await conn.fetchval("select count(*) from scheduler.timers") == WEBHOOKS:
                break
            await asyncio.sleep(0.1)
        start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(
            minutes=BACKLOG_MINUTES
        )
        # Everything is due now: the slots of the last ten minutes, as after an outage.
        await conn.execute("update scheduler.timers set due_at = $1", start)
        await conn.execute("select pg_notify('cronhooks_timers', '')")
    finally:
        await conn.close()
    return Herd(c, agent, start, servers)


async def settle(h: Herd, settings: Settings, timeout: float = 240) -> dict[str, int]:
    """Wait until every requested delivery has finished, then check every promise.

    The check and every row it judges come from one repeatable-read snapshot: the herd's
    webhooks fire every minute, and a minute boundary between two reads would otherwise
    count the next minute's in-flight deliveries as lost."""
    deadline = time.monotonic() + timeout
    while True:
        conn = await db(settings.database_url)
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                row = await conn.fetchrow("""
                    select (select count(*) from scheduler.slot_requests) as slots,
                           (select count(*) from eventstore.events where type = 'delivery.requested'
                              and (data->>'attempt')::int = 1) as requested,
                           (select count(distinct data->>'delivery_id') from eventstore.events
                              where type in ('delivery.succeeded', 'delivery.failed')) as finished,
                           (select count(*) from eventstore.outbox) as unpublished,
                           (select min(due_at) from scheduler.timers) as next_due,
                           now() as snapshot_at""")
                settled = (
                    row["next_due"] is not None
                    and row["next_due"] > row["snapshot_at"]
                    and row["finished"] == row["requested"] == row["slots"]
                    and row["unpublished"] == 0
                )
                if settled:
                    slots = await conn.fetch(
                        "select webhook_id, slot, delivery_id from scheduler.slot_requests"
                    )
                    timers = {
                        r["subject"]: r["due_at"]
                        for r in await conn.fetch("select subject, due_at from scheduler.timers")
                    }
                    succeeded = {
                        r["id"]
                        for r in await conn.fetch(
                            "select (data->>'delivery_id')::bigint as id from eventstore.events"
                            " where type = 'delivery.succeeded'"
                        )
                    }
                    event_ids = {
                        str(r["event_id"])
                        for r in await conn.fetch("select event_id from eventstore.events")
                    }
                    notes = {r["path"] for r in await conn.fetch("select path from importer.notes")}
        finally:
            await conn.close()
        if settled:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"herd did not settle: {dict(row)}")
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # the last published events of the snapshot reach our subscriber
    # One delivery id per slot, and no gap: every minute up to the timer's next slot.
    by_webhook: dict[int, list[datetime]] = {}
    for r in slots:
        by_webhook.setdefault(r["webhook_id"], []).append(r["slot"])
    gaps = 0
    for webhook_id, got in by_webhook.items():
        minutes = int((timers[webhook_id] - h.start).total_seconds() // 60)
        gaps += len({h.start + timedelta(minutes=i) for i in range(minutes)} ^ set(got))
    delivery_ids = {r["delivery_id"] for r in slots}
    received = [r.body["id"] for r in h.agent.received if r.path == "/hook"]
    lost = len(delivery_ids - succeeded) + len(delivery_ids - set(received))
    missing_events = len(event_ids - h.events)
    missing_notes = len({f"herd/{d}.md" for d in delivery_ids} - notes)
    return {
        "deliveries": len(delivery_ids),
        "lost": lost,
        "gaps": gaps,
        "duplicated_slots": len(slots) - len({(r["webhook_id"], r["slot"]) for r in slots}),
        "agent_duplicates": len(received) - len(set(received)),
        "events_unpublished": missing_events,
        "notes_lost": missing_notes,
    }


async def wait_progress(h: Herd, count: int) -> None:
    for _ in range(600):
        if len(h.agent.received) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no progress: {len(h.agent.received)} received")


async def kill_and_restart(h: Herd, service: str) -> None:
    proc = h.c.procs.pop(service)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    await asyncio.sleep(0.5)
    await h.c.start(service)


async def restart_rabbitmq(h: Herd) -> None:
    await h.servers.restart_rabbitmq()  # stop_app, start_app


async def restart_postgres(h: Herd) -> None:
    await h.servers.restart_postgres()  # pg_ctlcluster … restart


async def two_more_schedulers(h: Herd) -> None:
    for n in range(2):
        await h.c.start(
            "scheduler",
            name=f"extra-scheduler-{n}",
            env={"CRONHOOKS_SCHEDULER_PORT": str(free_port())},
        )


FAULTS: dict[str, Callable[[Herd], Awaitable[None]]] = {
    "kill -9 scheduler": lambda h: kill_and_restart(h, "scheduler"),
    "kill -9 dispatcher": lambda h: kill_and_restart(h, "dispatcher"),
    "kill -9 importer": lambda h: kill_and_restart(h, "importer"),
    "kill -9 admin-api": lambda h: kill_and_restart(h, "admin-api"),
    "restart RabbitMQ": restart_rabbitmq,
    "restart Postgres": restart_postgres,
    "3 schedulers at once": two_more_schedulers,
}


# The rows where the broker's queues matter, again with CRONHOOKS_QUEUE_TYPE=quorum.
QUORUM_FAULTS = ("kill -9 scheduler", "kill -9 dispatcher", "restart RabbitMQ")
ROWS = [
    *(pytest.param(fault, "classic", id=fault) for fault in FAULTS),
    *(pytest.param(fault, "quorum", id=f"{fault}, quorum queues") for fault in QUORUM_FAULTS),
]


@pytest.fixture
async def herd_cluster(settings: Settings, queue_type: str) -> AsyncIterator[tuple[Cluster, Agent]]:
    agent = await Agent(responder=answer_with_a_note).start()
    try:
        async with cluster(dataclasses.replace(settings, queue_type=queue_type)) as c:
            yield c, agent
    finally:
        await agent.stop()


@pytest.mark.parametrize(("fault", "queue_type"), ROWS)
async def test_a_herd_survives(
    fault: str,
    queue_type: str,
    herd_cluster,
    settings: Settings,
    amqp_url: str,
    private_servers: PrivateServers,
) -> None:  # type: ignore[no-untyped-def]
    c, agent = herd_cluster
    seen: set[str] = set()
    subscriber = await subscribe(amqp_url, seen)
    try:
        h = await start_herd(c, settings, agent, private_servers)
        h.events = seen
        extra_first = fault == "3 schedulers at once"
        if extra_first:
            await FAULTS[fault](h)
        await wait_progress(h, 300)
        before = len(agent.received)
        started = time.monotonic()
        if not extra_first:
            await FAULTS[fault](h)
        await wait_progress(h, before + 1)
        recovery = time.monotonic() - started
        result = await settle(h, settings)
    finally:
        await subscriber.close()
    label = fault if queue_type == "classic" else f"{fault} (quorum queues)"
    row = (
        f"| {label} | {result['deliveries']} | {result['lost']} | {result['duplicated_slots']} "
        f"| {result['gaps']} | {result['agent_duplicates']} | {result['events_unpublished']} "
        f"| {result['notes_lost']} | {recovery:.1f} s |"
    )
    print("\n" + row)
    ARTIFACTS.mkdir(exist_ok=True)
    if not TABLE.exists():
        TABLE.write_text(
            "| fault | deliveries | lost | duplicated slots | gaps | agent duplicates "
            "| events unpublished | notes lost | recovery |\n|---|---|---|---|---|---|---|---|---|\n"
        )
    with TABLE.open("a") as table:
        table.write(row + "\n")
    assert result["deliveries"] >= WEBHOOKS * BACKLOG_MINUTES
    assert result["lost"] == 0 and result["duplicated_slots"] == 0 and result["gaps"] == 0
    assert result["events_unpublished"] == 0 and result["notes_lost"] == 0
    for service in ("admin-api", "importer", "scheduler", "dispatcher"):
        assert c.procs[service].returncode is None, f"{service} died"
