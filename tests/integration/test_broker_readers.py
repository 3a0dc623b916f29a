"""A broker reader's queues are bounded (a forgotten reader keeps the newest N events, the
oldest dropped), and `cronhooks broker remove-reader` deletes the user, its queues and the
bound; on the real RabbitMQ, in the test's own vhost."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pika
import pika.exceptions

from cronhooks_common.settings import Settings
from tests.support import rabbit
from tests.support.inprocess import eventually
from tests.support.processes import cli

EVENTS_MD = (Path(__file__).resolve().parents[2] / "docs/reference/events.md").read_text()


def _subscribe_and_publish(amqp_url: str, user: str, password: str, count: int) -> None:
    """As the reader: a queue `USER.all` bound to every event; then, as the services'
    user, `count` events published to the exchange (confirmed)."""
    services = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = services.channel()
        channel.exchange_declare("cronhooks.events", "topic", durable=True)
        params = pika.URLParameters(amqp_url)
        params.credentials = pika.PlainCredentials(user, password)
        reader = pika.BlockingConnection(params)
        try:
            own = reader.channel()
            own.queue_declare(f"{user}.all", durable=True)
            own.queue_bind(f"{user}.all", "cronhooks.events", routing_key="#")
        finally:
            reader.close()
        channel.confirm_delivery()
        for i in range(count):
            channel.basic_publish("cronhooks.events", "delivery.succeeded", str(i).encode())
    finally:
        services.close()


def _head(amqp_url: str, queue: str) -> bytes:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        _, _, body = connection.channel().basic_get(queue, auto_ack=False)
        return body or b""
    finally:
        connection.close()


def _length(amqp_url: str, queue: str) -> int:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        declared = connection.channel().queue_declare(queue, passive=True)
        return int(declared.method.message_count)
    finally:
        connection.close()


async def _get(session: aiohttp.ClientSession, path: str) -> tuple[int, object]:
    async with session.get(f"{rabbit.MANAGEMENT}/{path}") as resp:
        return resp.status, (await resp.json() if resp.status == 200 else None)


async def test_a_readers_queues_are_bounded_and_remove_reader_deletes_everything(
    settings: Settings, amqp_url: str, vhost: str
) -> None:
    user = f"fh-{uuid.uuid4().hex[:8]}"
    vhost = quote(vhost, safe="")
    queue = quote(f"{user}.all", safe="")
    try:
        code, out, err = await cli(settings, "broker", "add-reader", user, "--max-length", "5")
        assert code == 0, err
        assert "at most 5 messages each" in out
        # events.md shows this output for `add-reader billing` (the default 10000)
        [shown] = re.findall(r"^# (user billing: .*)$", EVENTS_MD, re.M)
        assert out.splitlines()[0] == shown.replace("billing", user).replace("10000", "5")
        password = out.strip().splitlines()[-1]
        await asyncio.to_thread(_subscribe_and_publish, amqp_url, user, password, 12)
        async with aiohttp.ClientSession(headers=rabbit.AUTH) as session:
            status, policy = await _get(session, f"policies/{vhost}/cronhooks-reader-{user}")
            assert status == 200 and isinstance(policy, dict)
            assert policy["definition"] == {"max-length": 5, "overflow": "drop-head"}
            assert await asyncio.to_thread(_length, amqp_url, f"{user}.all") == 5
            # The oldest were dropped: the head is the 8th of 12 (0-based 7).
            assert await asyncio.to_thread(_head, amqp_url, f"{user}.all") == b"7"

            code, out, err = await cli(settings, "broker", "remove-reader", user)
            assert code == 0, err
            assert f"{user}.all" in out
            assert (await _get(session, f"users/{user}"))[0] == 404
            assert (await _get(session, f"queues/{vhost}/{queue}"))[0] == 404
            assert (await _get(session, f"policies/{vhost}/cronhooks-reader-{user}"))[0] == 404
        # Removing it again is not an error (a script may run twice).
        code, _, err = await cli(settings, "broker", "remove-reader", user)
        assert code == 0, err
    finally:  # users are broker-wide: leave none behind
        async with (
            aiohttp.ClientSession(headers=rabbit.AUTH) as session,
            session.delete(f"{rabbit.MANAGEMENT}/users/{user}"),
        ):
            pass


async def test_a_reader_cannot_be_named_like_the_services_queues(settings: Settings) -> None:
    code, _, err = await cli(settings, "broker", "add-reader", "cronhooks")
    assert code == 1 and "not cronhooks" in err


async def test_the_subscriber_example_of_events_md_runs_as_a_reader(
    settings: Settings, amqp_url: str, vhost: str
) -> None:
    """events.md's aio-pika subscriber, run as written with a reader's credentials (its
    user, password and vhost substituted), prints the delivery events published."""
    [code] = re.findall(r"```python\n(.*?)```", EVENTS_MD.split("## Subscribing", 1)[1], re.S)
    assert code.rstrip().endswith("asyncio.run(main())")
    user = f"fh-{uuid.uuid4().hex[:8]}"
    namespace: dict[str, Any] = {}
    try:
        code_, out, err = await cli(settings, "broker", "add-reader", user)
        assert code_ == 0, err
        password = out.strip().splitlines()[-1]
        url = f"amqp://{user}:{password}@127.0.0.1:5672/{quote(vhost, safe='')}"
        assert "amqp://billing:PASSWORD@127.0.0.1:5672/" in code
        code = code.replace("amqp://billing:PASSWORD@127.0.0.1:5672/", url)
        code = code.replace("billing.", f"{user}.").replace("asyncio.run(main())", "")
        exec(compile(code, "events.md", "exec"), namespace)
        await asyncio.to_thread(_declare_exchange, amqp_url)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            task = asyncio.create_task(namespace["main"]())
            try:
                await eventually(lambda: _bound(vhost, f"{user}.deliveries"), timeout=10)
                await asyncio.to_thread(_publish_delivery_events, amqp_url)
                await eventually(lambda: _lines(printed, 2), timeout=10)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        # delivery.requested is not bound; the duplicate message id is skipped.
        assert printed.getvalue().splitlines() == [
            "delivery.succeeded 7 success",
            "delivery.failed 8 failed",
        ]
    finally:
        await cli(settings, "broker", "remove-reader", user)


def _declare_exchange(amqp_url: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        connection.channel().exchange_declare("cronhooks.events", "topic", durable=True)
    finally:
        connection.close()


async def _bound(vhost: str, queue: str) -> bool:
    """The example's queue has its last binding (read from the broker's routing table)."""
    path = f"queues/{quote(vhost, safe='')}/{quote(queue, safe='')}/bindings"
    async with aiohttp.ClientSession(headers=rabbit.AUTH) as session:
        status, bindings = await _get(session, path)
    keys = (
        {b["routing_key"] for b in bindings}
        if status == 200 and isinstance(bindings, list)
        else set()
    )
    return "delivery.failed" in keys


def _publish_delivery_events(amqp_url: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        for key, delivery_id, status, message_id in (
            ("delivery.requested", 6, "pending", "e-6"),
            ("delivery.succeeded", 7, "success", "e-7"),
            ("delivery.succeeded", 7, "success", "e-7"),  # at least once: a duplicate
            ("delivery.failed", 8, "failed", "e-8"),
        ):
            body = json.dumps({"type": key, "data": {"delivery_id": delivery_id, "status": status}})
            channel.basic_publish(
                "cronhooks.events",
                key,
                body.encode(),
                pika.BasicProperties(message_id=message_id, delivery_mode=2),
            )
    finally:
        connection.close()


async def _lines(text: io.StringIO, count: int) -> bool:
    return len(text.getvalue().splitlines()) >= count
