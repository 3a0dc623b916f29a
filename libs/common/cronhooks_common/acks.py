"""Settling consumed messages in bulk: the acks that become ready in one event-loop turn
leave as one `multiple` ack where they can, as single acks where they cannot, and all of
them in one write.

A consumer's messages finish out of order (the dispatcher has a hundred HTTP calls in
flight). A `multiple` ack on tag T settles *every* outstanding message up to T, so it
may only be sent for the longest run of finished messages from the oldest unsettled
one; a finished message beyond a still-running one is acked alone — holding it back
would keep it counted against the prefetch window and stall the consumer behind one
slow agent. A herd's messages mostly finish in delivery order, so most of them are
covered by a few `multiple` acks.

Delivery tags belong to a channel: each channel's tags are tracked and written
separately, and once a channel (or its connection) has closed its messages are
forgotten — the broker hands them out again and the inbox absorbs the repeat. Never is
a tag settled twice (the broker would close the channel for it): a single ack, a reject
or a `multiple` ack marks what it covers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field

import structlog
from aiormq.abc import AbstractChannel, DeliveredMessage
from pamqp.commands import Basic

from cronhooks_common import amqp_writes
from cronhooks_common.broker import TRANSIENT_AMQP_ERRORS

log = structlog.get_logger(__name__)

_RUNNING, _FINISHED, _SETTLED = 0, 1, 2
WRITE_WAIT_SECONDS = 1.0  # then check whether the channel is still there


@dataclass(slots=True)
class _ChannelTags:
    channel: AbstractChannel
    order: deque[int] = field(default_factory=deque)  # delivered, not yet settled, oldest first
    state: dict[int, int] = field(default_factory=dict)
    finished: list[int] = field(default_factory=list)  # since the last flush
    flushing: asyncio.Task[None] | None = None

    def take_acks(self) -> list[tuple[int, bool]]:
        """The acks to send now, as (tag, multiple); marks what they settle."""
        acks: list[tuple[int, bool]] = []
        covered = 0
        while self.order and self.state[self.order[0]] != _RUNNING:
            tag = self.order.popleft()
            if self.state.pop(tag) == _FINISHED:
                covered = tag  # the run's newest unsettled tag: one ack settles the run
        if covered:
            acks.append((covered, True))
        for tag in self.finished:
            if self.state.get(tag) == _FINISHED:  # beyond a running message: alone
                self.state[tag] = _SETTLED
                acks.append((tag, False))
        self.finished.clear()
        return acks


class AckBatcher:
    def __init__(self) -> None:
        self._channels: dict[AbstractChannel, _ChannelTags] = {}

    def delivered(self, message: DeliveredMessage) -> None:
        """Call for every message as it arrives, in delivery order."""
        tags = self._channels.get(message.channel)
        if tags is None:
            self._forget_gone()
            tags = self._channels[message.channel] = _ChannelTags(message.channel)
        tag = _tag(message)
        tags.order.append(tag)
        tags.state[tag] = _RUNNING

    def ack(self, message: DeliveredMessage) -> None:
        """`message` is handled: its ack leaves with the others of this loop turn."""
        tags = self._channels.get(message.channel)
        tag = _tag(message)
        if tags is None or tags.state.get(tag) != _RUNNING:
            return  # its channel is gone (forgotten) or it was settled already
        tags.state[tag] = _FINISHED
        tags.finished.append(tag)
        if tags.flushing is None:
            tags.flushing = asyncio.get_running_loop().create_task(self._flush(tags))

    async def reject(self, message: DeliveredMessage) -> None:
        """Dead-letter `message` now (rare: malformed or poison)."""
        tags = self._channels.get(message.channel)
        tag = _tag(message)
        if tags is None or tags.state.get(tag) != _RUNNING:
            return
        tags.state[tag] = _SETTLED
        with contextlib.suppress(*TRANSIENT_AMQP_ERRORS):
            await message.channel.basic_reject(tag, requeue=False)

    async def drain(self) -> None:
        """Wait until every ack asked for so far has been handed to its connection (or its
        channel is gone)."""
        while flushing := [t.flushing for t in self._channels.values() if t.flushing]:
            await asyncio.gather(*(asyncio.shield(f) for f in flushing))

    def _forget_gone(self) -> None:
        for channel, tags in list(self._channels.items()):
            if _gone(channel) and tags.flushing is None:
                del self._channels[channel]

    @staticmethod
    async def _flush(tags: _ChannelTags) -> None:
        # One flusher per channel, started one loop turn after the first ack of a round:
        # the acks of that turn are in. A channel whose connection died cannot hold up the
        # acks of its successor. Acks that come in while it waits go in its next round.
        try:
            while not _gone(tags.channel) and (acks := tags.take_acks()):
                await _write(tags.channel, acks)
        finally:
            tags.flushing = None


async def _write(channel: AbstractChannel, acks: list[tuple[int, bool]]) -> None:
    """Hand `acks` to the connection's writer; give up once the channel is gone (the broker
    then hands the messages out again). The wait is bounded so that a connection that
    died without closing its channel yet is noticed."""
    while not _gone(channel):
        try:
            async with asyncio.timeout(WRITE_WAIT_SECONDS):  # not wait_for (clock.wait_set)
                await amqp_writes.queue_acks(channel, acks)
            return
        except TRANSIENT_AMQP_ERRORS as exc:  # a timeout among them: look again
            if not isinstance(exc, TimeoutError):
                return


def _gone(channel: AbstractChannel) -> bool:
    connection = getattr(channel, "connection", None)
    return bool(channel.is_closed or (connection is not None and connection.is_closed))


def _tag(message: DeliveredMessage) -> int:
    delivery = message.delivery
    assert isinstance(delivery, (Basic.Deliver, Basic.GetOk))  # a message with a tag
    assert delivery.delivery_tag is not None
    return delivery.delivery_tag
