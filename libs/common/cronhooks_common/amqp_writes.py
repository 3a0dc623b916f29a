"""One socket write for the AMQP frames that are ready together (a publish round, the acks
of a batch), instead of one write per frame; and a publish round queued in one go.

aiormq's connection writer takes one frame from its queue and writes it, then the next:
a publish round of a thousand events is a thousand `send` calls, and on this hot path a
send costs more than marshalling the frame. `install()` makes its frame iterator hand the
writer everything already queued as one frame: the bytes concatenated in queue order (so
the broker sees exactly the same stream), the flags kept — a frame that must be drained
(its publisher waits for the write) is drained after the combined write, a close frame
ends the combination and closes as before.

`queue_confirmed_round` queues a whole round of publishes under one hold of the channel
lock: aiormq's `basic_publish` costs, per message, a timeout and two context managers,
a lock, a task (gathered), pamqp's validation and marshalling of the same method frame,
together about as much CPU as the broker spends on the message. Here the method frame
is marshalled once per routing key, and each message takes the next delivery tag and a
confirmation future of the channel exactly as `basic_publish` would (so a closing channel
rejects them, as it rejects its own).

Both reach into aiormq's internals, so they check the version they were written for
(`cronhooks_common.broker` installs at import); any other version runs aiormq's own
writer and `basic_publish` unchanged and logs that.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from importlib.metadata import version
from typing import Any

import pamqp.frame
import structlog
from aiormq import connection as aiormq_connection
from aiormq.abc import ChannelFrame
from aiormq.exceptions import ChannelInvalidStateError
from pamqp.commands import Basic
from pamqp.header import ContentHeader

log = structlog.get_logger(__name__)

FOR_AIORMQ = "7.2.4"
MAX_COMBINED_BYTES = 1 << 20  # a combined write stays reasonable; the rest waits a turn


class CombinedFrame:
    """What the writer needs of a frame (`payload`, `should_close`, `should_drain`,
    `drain()`), for several queued frames at once."""

    __slots__ = ("_frames", "payload", "should_close")

    def __init__(self, frames: list[ChannelFrame]) -> None:
        self._frames = frames
        self.payload = b"".join(f.payload for f in frames)
        self.should_close = any(f.should_close for f in frames)

    @property
    def should_drain(self) -> bool:
        return any(f.should_drain for f in self._frames)

    def drain(self) -> None:
        for frame in self._frames:
            frame.drain()


def combine_ready(first: ChannelFrame, queue: asyncio.Queue[Any]) -> ChannelFrame | CombinedFrame:
    """`first` and every frame queued behind it now, up to a close frame or the size cap."""
    if first.should_close or queue.empty():
        return first
    frames, size = [first], len(first.payload)
    while not queue.empty() and size < MAX_COMBINED_BYTES:
        frame = queue.get_nowait()
        queue.task_done()
        frames.append(frame)
        size += len(frame.payload)
        if frame.should_close:
            break
    return CombinedFrame(frames)


async def _combining_anext(self: Any) -> ChannelFrame | CombinedFrame:
    if self.close_event.is_set():
        raise StopAsyncIteration
    first: ChannelFrame = await self.queue.get()
    self.queue.task_done()
    return combine_ready(first, self.queue)


INSTALLED = False
@functools.lru_cache(maxsize=1024)  # routing keys are event types: a few dozen
def _method_frame(exchange: str, routing_key: str, channel_number: int) -> bytes:
    publish = Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=False)
    return pamqp.frame.marshal(publish, channel_number)


async def queue_confirmed_round(
    channel: Any,  # an aiormq.Channel in confirm mode (aio-pika's underlay)
    exchange: str,
    messages: list[tuple[str, bytes, Basic.Properties]],
) -> list[asyncio.Future[Any]]:
    """Queue `(routing key, body, properties)` publishes on a confirm-mode channel, in order;
    the confirmation future of each (what `basic_publish` would have awaited)."""
    confirmations: list[asyncio.Future[Any]] = []
    number = channel.number
    async with channel.lock:
        if channel.is_closed:  # the relay reconnects and publishes the round again
            raise ChannelInvalidStateError("channel closed before a publish round")
        for routing_key, body, properties in messages:
            parts = [_method_frame(exchange, routing_key, number)]
            parts.append(pamqp.frame.marshal(ContentHeader(0, len(body), properties), number))
            parts.extend(pamqp.frame.marshal(part, number) for part in channel._split_body(body))
            frame = ChannelFrame(payload=b"".join(parts), should_close=False)
            # The write queue is bounded: this waits while the writer catches up. Only once
            # the frame is queued does it take a delivery tag (no await in between, so no
            # confirm can come first): a cancelled wait leaves the broker's count and ours
            # the same, as basic_publish's rollback does.
            await channel.write_queue.put(frame)
            channel.delivery_tag += 1
            confirmation = channel.create_future()
            channel.confirmations[channel.delivery_tag] = confirmation
            confirmations.append(confirmation)
    return confirmations


def install() -> bool:
    """Combine queued frames in aiormq's writer; False (and a log line) if not installed."""
    global INSTALLED
    found = version("aiormq")
    if found != FOR_AIORMQ:
        log.warning("amqp_write_combining_off", aiormq=found, written_for=FOR_AIORMQ)
        return False
    aiormq_connection.FrameGenerator.__anext__ = _combining_anext  # type: ignore[method-assign,assignment]
    INSTALLED = True
    return True


# Basic.Ack as a method frame: type 1, channel, payload size 13, class 60 / method 80,
# the delivery tag, the `multiple` bit; then the frame end octet.
_ACK_FRAME = struct.Struct(">BHIHHQBB")


def ack_frame(channel_number: int, delivery_tag: int, multiple: bool) -> bytes:
    return _ACK_FRAME.pack(1, channel_number, 13, 60, 80, delivery_tag, multiple, 0xCE)


async def queue_acks(channel: Any, acks: list[tuple[int, bool]]) -> None:
    """Queue `(delivery tag, multiple)` acks on an aiormq channel as one frame (one socket
    write); aiormq's `basic_ack` each where aiormq is not the version this was written for."""
    if not INSTALLED:
        for tag, multiple in acks:
            await channel.basic_ack(tag, multiple=multiple, wait=False)
        return
    if channel.is_closed:
        raise ChannelInvalidStateError("channel closed before its acks")
    number = channel.number
    payload = b"".join(ack_frame(number, tag, multiple) for tag, multiple in acks)
    await channel.write_queue.put(ChannelFrame(payload=payload, should_close=False))
