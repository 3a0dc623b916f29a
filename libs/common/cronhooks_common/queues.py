"""Declaring the services' queues as CRONHOOKS_QUEUE_TYPE says (CONTRACT §12).

`classic` declares a queue as cronhooks always did: durable, with no `x-queue-type`, so an
upgrade redeclares existing queues unchanged. `quorum` adds `x-queue-type: quorum` to every
queue, dead-letter queues included: replicated by Raft over the nodes of a cluster, they
lose no confirmed message when a node dies.

Quorum queues refuse what classic ones allow: exclusive, auto-delete and non-durable
queues, classic-only arguments (`x-max-priority`, `x-queue-mode`) and a global QoS. The
services declare none of those; `queue_arguments` refuses them in quorum mode before the
broker does (the broker's answer would close the channel), except `x-queue-mode: lazy`,
which is dropped: a quorum queue keeps its messages on disk anyway.

A queue whose dead letters matter gets at-least-once dead-lettering in quorum mode
(RabbitMQ 3.10+): the broker keeps the message in the source queue until the dead-letter
queue has confirmed it, where at-most-once could drop it if a node died in between.

A queue that exists with the other type cannot be redeclared (RabbitMQ answers
PRECONDITION_FAILED and closes the channel); `declare` turns that into `QueueSetupError`,
one line naming the queue and the setting, which `cronhooks run` prints before exiting
with status 2 (a configuration error: restarting does not help).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import aiormq
from aio_pika.abc import AbstractChannel, AbstractQueue

CLASSIC, QUORUM = "classic", "quorum"
QUEUE_TYPES = (CLASSIC, QUORUM)
SETTING = "CRONHOOKS_QUEUE_TYPE"
# At-least-once dead-lettering (x-dead-letter-strategy) came with RabbitMQ 3.10.
QUORUM_MIN_VERSION = (3, 10)

_CLASSIC_ONLY = ("x-max-priority",)  # refused by quorum queues, no equivalent
_MEANINGLESS_FOR_QUORUM = ("x-queue-mode",)  # lazy mode: quorum queues are on disk anyway


class QueueSetupError(RuntimeError):
    """A queue cannot be declared as configured; the message is one line for operators."""


def queue_arguments(
    queue_type: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    name: str,
    durable: bool = True,
    exclusive: bool = False,
    auto_delete: bool = False,
) -> dict[str, Any]:
    """The `x-` arguments a queue is declared with for `queue_type`."""
    if queue_type not in QUEUE_TYPES:
        raise QueueSetupError(f"{SETTING}: unknown queue type {queue_type!r}")
    args = dict(arguments or {})
    if queue_type == CLASSIC:
        return args
    refused = [
        what
        for what, set_ in (
            ("exclusive", exclusive),
            ("auto-delete", auto_delete),
            ("non-durable", not durable),
            *((arg, arg in args) for arg in _CLASSIC_ONLY),
        )
        if set_
    ]
    if refused:
        raise QueueSetupError(
            f"queue {name!r}: {', '.join(refused)} is not possible for a quorum queue"
            f" ({SETTING}=quorum)"
        )
    for arg in _MEANINGLESS_FOR_QUORUM:
        args.pop(arg, None)
    args["x-queue-type"] = QUORUM
    if "x-dead-letter-exchange" in args:
        # at-least-once needs reject-publish overflow; without a length limit it never acts.
        args.setdefault("x-dead-letter-strategy", "at-least-once")
        args.setdefault("x-overflow", "reject-publish")
    return args


def server_version(channel: aiormq.abc.AbstractChannel) -> tuple[int, ...]:
    """The broker's major and minor version (`3.10.8` → (3, 10)); () if it does not say."""
    raw = channel.connection.server_properties.get("version", "")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else ()


async def check_broker(channel: AbstractChannel, queue_type: str) -> None:
    """Refuse quorum mode on a broker too old for the arguments it uses."""
    if queue_type != QUORUM:
        return
    version = server_version(await channel.get_underlay_channel())
    if version and version < QUORUM_MIN_VERSION:
        shown = ".".join(map(str, version))
        wanted = ".".join(map(str, QUORUM_MIN_VERSION))
        raise QueueSetupError(
            f"{SETTING}=quorum needs RabbitMQ {wanted} or later (the broker is {shown})"
        )


async def declare(
    channel: AbstractChannel,
    name: str,
    *,
    queue_type: str,
    arguments: Mapping[str, Any] | None = None,
) -> AbstractQueue:
    """Declare the durable queue `name` as `queue_type`; `QueueSetupError` on a mismatch."""
    args = queue_arguments(queue_type, arguments, name=name)
    connection = (await channel.get_underlay_channel()).connection
    try:
        return await channel.declare_queue(name, durable=True, arguments=args)
    except aiormq.exceptions.ChannelPreconditionFailed as exc:
        reason = str(exc).removeprefix("PRECONDITION_FAILED - ")
        other = next(t for t in QUEUE_TYPES if t != queue_type)
        if await _declares(connection, name, queue_arguments(other, arguments, name=name)):
            raise QueueSetupError(
                f"queue {name!r} is a {other} queue but {SETTING}={queue_type}; set"
                f" {SETTING}={other}, or drain and delete the queue (docs/deployment.md)"
            ) from None
        raise QueueSetupError(
            f"queue {name!r} exists with other arguments than {SETTING}={queue_type} gives"
            f" ({reason}); drain and delete it (docs/deployment.md)"
        ) from None


async def _declares(connection: aiormq.abc.AbstractConnection, name: str, args: Any) -> bool:
    """Whether `name` redeclares with `args` (a no-op when they match what it has): how the
    type of an existing queue is learnt over AMQP, which has no query for it."""
    probe = await connection.channel()
    try:
        await probe.queue_declare(name, durable=True, arguments=args)
    except aiormq.exceptions.ChannelPreconditionFailed:
        return False
    finally:
        if not probe.is_closed:
            await probe.close()
    return True
