"""Credentials follow the state (CONTRACT §15): admin tokens can be listed, revoked and
made to expire; `make up` reuses its own token; a broker reader reads and nothing more."""

from __future__ import annotations

import asyncio
import dataclasses
import stat
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pika
import pika.exceptions
import pytest

from cronhooks_admin.auth import create_token
from cronhooks_cli.quick_start import quick_start_token
from cronhooks_common import db
from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.support import rabbit
from tests.support.inprocess import running
from tests.support.processes import cli


async def test_admin_tokens_are_listed_revoked_and_expire(settings: Settings) -> None:
    code, out, _ = await cli(
        settings, "admin", "create-token", "--name", "ops", "--expires-in", "30d"
    )
    assert code == 0
    expiring = out.strip().splitlines()[-1]  # the token is the last line
    code, out, _ = await cli(settings, "admin", "create-token", "--name", "ci")
    forever = out.strip().splitlines()[-1]
    code, listing, _ = await cli(settings, "admin", "list-tokens")
    assert code == 0 and expiring not in listing and forever not in listing
    rows = [line.split("\t") for line in listing.strip().splitlines()[1:]]
    assert [(r[1], r[4]) for r in rows] == [("ops", "-"), ("ci", "-")]
    expires = datetime.fromisoformat(rows[0][3])
    assert timedelta(days=29, hours=23) < expires - datetime.now(UTC) <= timedelta(days=30)
    assert rows[1][3] == "-"
    assert (await cli(settings, "admin", "create-token", "--name", "x", "--expires-in", "soon"))[
        0
    ] == 2

    clock = ManualClock(datetime.now(UTC))
    async with running(settings, clock, ("admin-api",)) as r:
        assert (await r.graphql(expiring, "{ agents { id } }"))[0] == 200
        assert (await r.graphql(forever, "{ agents { id } }"))[0] == 200
        # Expiry holds at once (even for a token just seen), by the service's clock.
        clock.advance(timedelta(days=31))
        assert (await r.graphql(expiring, "{ agents { id } }"))[0] == 401
        assert (await r.graphql(forever, "{ agents { id } }"))[0] == 200
        # A revoked token is refused (a token seen in the last 5 s may still pass once).
        unused = await _token(settings, "unused")
        code, out, _ = await cli(
            settings, "admin", "revoke-token", str(await _id_of(settings, "unused"))
        )
        assert code == 0 and "revoked" in out
        assert (await r.graphql(unused, "{ agents { id } }"))[0] == 401
    code, _, err = await cli(settings, "admin", "revoke-token", "9999")
    assert code == 1 and "no live admin token" in err


async def _token(settings: Settings, name: str) -> str:
    conn = await db.connect(settings.database_url, name="test")
    try:
        return await create_token(conn, name)
    finally:
        await conn.close()


async def _id_of(settings: Settings, name: str) -> int:
    conn = await db.connect(settings.database_url, name="test")
    try:
        return int(await conn.fetchval("select id from admin.tokens where name = $1", name))
    finally:
        await conn.close()


async def test_make_up_reuses_its_own_token_while_it_is_live(
    settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / ".cronhooks-admin-token"
    first = await quick_start_token(settings, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert await quick_start_token(settings, path) == first
    conn = await db.connect(settings.database_url, name="test")
    try:
        assert await conn.fetchval("select count(*) from admin.tokens") == 1
        await conn.execute("update admin.tokens set revoked_at = now()")
    finally:
        await conn.close()
    second = await quick_start_token(settings, path)
    assert second != first and path.read_text().strip() == second


def _reader_channel(
    amqp_url: str, user: str, password: str
) -> pika.adapters.blocking_connection.BlockingChannel:
    params = pika.URLParameters(amqp_url)
    params.credentials = pika.PlainCredentials(user, password)
    return pika.BlockingConnection(params).channel()


def _try(amqp_url: str, user: str, password: str, action: str) -> str:
    channel = _reader_channel(amqp_url, user, password)
    try:
        if action == "subscribe":
            channel.queue_declare(f"{user}.events", durable=True)
            channel.queue_bind(f"{user}.events", "cronhooks.events", routing_key="delivery.*")
            channel.basic_consume(f"{user}.events", lambda *_: None)
        elif action == "subscribe_quorum":  # a reader of a cluster, as the services are
            channel.queue_declare(
                f"{user}.events", durable=True, arguments={"x-queue-type": "quorum"}
            )
            channel.queue_bind(f"{user}.events", "cronhooks.events", routing_key="delivery.*")
            channel.basic_consume(f"{user}.events", lambda *_: None)
        elif action == "publish":
            channel.confirm_delivery()
            channel.basic_publish("cronhooks.events", "delivery.requested", b"{}")
        elif action == "services_queue":
            channel.queue_declare("cronhooks.dispatcher", passive=False, durable=True)
        elif action.startswith("read_services_queue"):
            channel.basic_get("cronhooks.dispatcher")
        return "ok"
    except pika.exceptions.ChannelClosedByBroker as exc:
        return f"refused {exc.reply_code}"
    finally:
        if channel.connection.is_open:
            channel.connection.close()


@pytest.mark.parametrize(
    ("action", "outcome"),
    [
        ("subscribe", "ok"),
        ("publish", "refused 403"),
        ("services_queue", "refused 403"),
        ("read_services_queue", "refused 403"),
        ("subscribe_quorum", "ok"),
        ("read_services_queue_quorum", "refused 403"),
    ],
)
async def test_a_broker_reader_reads_and_nothing_more(
    settings: Settings, amqp_url: str, action: str, outcome: str
) -> None:
    user = f"dash-{uuid.uuid4().hex[:8]}"
    if action.endswith("_quorum"):  # the services on quorum queues (CRONHOOKS_QUEUE_TYPE)
        settings = dataclasses.replace(settings, queue_type="quorum")
    try:
        async with running(settings, ManualClock(datetime.now(UTC)), ("dispatcher",)):
            code, out, err = await cli(settings, "broker", "add-reader", user)
            assert code == 0, err
            password = out.strip().splitlines()[-1]
            got = await asyncio.to_thread(_try, amqp_url, user, password, action)
            assert got == outcome
    finally:  # users are broker-wide: leave none behind
        async with (
            aiohttp.ClientSession(headers=rabbit.AUTH) as session,
            session.delete(f"{rabbit.MANAGEMENT}/users/{user}"),
        ):
            pass
    code, _, err = await cli(settings, "broker", "add-reader", "Bad Name")
    assert code == 1 and "NAME" in err
