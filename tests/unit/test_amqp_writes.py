"""Queued AMQP frames leave in one write, with the same bytes in the same order and the
same drain and close behaviour as one by one (amqp_writes.py)."""

from __future__ import annotations

import asyncio

from aiormq import connection as aiormq_connection
from aiormq.abc import ChannelFrame

from cronhooks_common import amqp_writes


async def test_ready_frames_are_combined_in_queue_order_with_their_flags() -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[ChannelFrame] = asyncio.Queue()
    drains = [loop.create_future(), loop.create_future()]
    frames = [
        ChannelFrame(payload=b"publish-1", should_close=False, drain_future=drains[0]),
        ChannelFrame(payload=b"ack-7", should_close=False),
        ChannelFrame(payload=b"publish-2", should_close=False, drain_future=drains[1]),
    ]
    for frame in frames[1:]:
        queue.put_nowait(frame)
    combined = amqp_writes.combine_ready(frames[0], queue)
    assert queue.empty()
    assert combined.payload == b"publish-1ack-7publish-2"
    assert combined.should_drain and not combined.should_close
    combined.drain()
    assert all(d.done() for d in drains)  # every waiting publisher is released


async def test_a_close_frame_ends_the_combination_and_a_lone_frame_stays_itself() -> None:
    queue: asyncio.Queue[ChannelFrame] = asyncio.Queue()
    first = ChannelFrame(payload=b"a", should_close=False)
    close = ChannelFrame(payload=b"close-ok", should_close=True)
    after = ChannelFrame(payload=b"never-sent-with-it", should_close=False)
    queue.put_nowait(close)
    queue.put_nowait(after)
    combined = amqp_writes.combine_ready(first, queue)
    assert combined.payload == b"aclose-ok" and combined.should_close
    assert queue.get_nowait() is after
    assert amqp_writes.combine_ready(after, queue) is after


async def test_the_writer_takes_everything_queued_in_one_step() -> None:
    assert amqp_writes.install()  # the pinned aiormq
    queue: asyncio.Queue[ChannelFrame] = asyncio.Queue()
    for i in range(50):
        queue.put_nowait(ChannelFrame(payload=b"%03d" % i, should_close=False))
    frames = aiormq_connection.FrameGenerator(queue)
    combined = await frames.__anext__()
    assert combined.payload == b"".join(b"%03d" % i for i in range(50))
    assert queue.empty()
