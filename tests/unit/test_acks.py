"""Bulk acks (acks.py): a `multiple` ack only over a run of finished messages from the
oldest unsettled one, single acks beyond a running one, never a tag settled twice; and
the ack frame is byte for byte what pamqp marshals."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pamqp.frame
from aiormq.abc import ChannelFrame, DeliveredMessage
from hypothesis import given
from hypothesis import strategies as st
from pamqp.commands import Basic
from pamqp.header import ContentHeader

from cronhooks_common.acks import (
    _FINISHED,
    _RUNNING,
    _SETTLED,
    WRITE_WAIT_SECONDS,
    AckBatcher,
    _ChannelTags,
)
from cronhooks_common.amqp_writes import ack_frame


def tracked(n: int) -> _ChannelTags:
    tags = _ChannelTags(channel=object())  # type: ignore[arg-type]  # only kept, not used
    for tag in range(1, n + 1):
        tags.order.append(tag)
        tags.state[tag] = _RUNNING
    return tags


def finish(tags: _ChannelTags, *done: int) -> None:
    for tag in done:
        tags.state[tag] = _FINISHED
        tags.finished.append(tag)


def test_a_run_from_the_oldest_is_one_multiple_ack_and_the_rest_go_alone() -> None:
    tags = tracked(6)
    finish(tags, 2, 1, 3, 5)  # 4 still runs
    assert tags.take_acks() == [(3, True), (5, False)]
    finish(tags, 4, 6)
    # 5 was acked alone: the run 4..6 is settled by one ack on 6, which skips nothing.
    assert tags.take_acks() == [(6, True)]
    assert not tags.order and not tags.state


def test_a_rejected_message_is_never_covered_again() -> None:
    tags = tracked(3)
    tags.state[1] = _SETTLED  # rejected (dead-lettered) on its own
    assert tags.take_acks() == []
    finish(tags, 2)
    assert tags.take_acks() == [(2, True)]
    tags.state[3] = _SETTLED
    assert tags.take_acks() == []  # a run of settled ones needs no ack at all


def test_nothing_finished_sends_nothing() -> None:
    tags = tracked(3)
    assert tags.take_acks() == []


@given(st.integers(min_value=1, max_value=60), st.randoms(use_true_random=False))
def test_any_finishing_order_settles_every_tag_exactly_once(n: int, rnd: random.Random) -> None:
    """Replay the acks against a model of the broker: a `multiple` ack settles every
    outstanding tag up to its own, which must itself be outstanding; nothing is settled
    twice, nothing still running is settled, and in the end everything is."""
    tags = tracked(n)
    order = list(range(1, n + 1))
    rnd.shuffle(order)
    outstanding = set(range(1, n + 1))
    running = set(outstanding)
    while order:
        k = rnd.randint(1, 5)  # how many finish within one loop turn
        batch, order = order[:k], order[k:]
        finish(tags, *batch)
        running -= set(batch)
        for tag, multiple in tags.take_acks():
            assert tag in outstanding and tag not in running
            settled = {t for t in outstanding if t <= tag} if multiple else {tag}
            assert not (settled & running)
            outstanding -= settled
    assert not outstanding


def test_the_ack_frame_is_what_pamqp_marshals() -> None:
    for channel, tag, multiple in ((1, 1, False), (7, 2**40 + 3, True), (65535, 2**63 - 1, False)):
        expected = pamqp.frame.marshal(Basic.Ack(delivery_tag=tag, multiple=multiple), channel)
        assert ack_frame(channel, tag, multiple) == expected


class FakeChannel:
    """What the batcher uses of an aiormq channel: its number, its connection's write
    queue (aiormq's is bounded at 10 frames) and whether it is closed."""

    def __init__(self, number: int, room: int = 10) -> None:
        self.number = number
        self.write_queue: asyncio.Queue[ChannelFrame] = asyncio.Queue(maxsize=room)
        self.is_closed = False
        self.connection = SimpleNamespace(is_closed=False)


def message(channel: FakeChannel, tag: int) -> DeliveredMessage:
    return DeliveredMessage(
        delivery=Basic.Deliver(delivery_tag=tag),
        header=ContentHeader(),
        body=b"",
        channel=channel,  # type: ignore[arg-type]
    )


async def test_acks_of_one_loop_turn_leave_as_one_frame() -> None:
    channel = FakeChannel(3)
    acks = AckBatcher()
    messages = [message(channel, tag) for tag in range(1, 6)]
    for m in messages:
        acks.delivered(m)
    for m in (messages[1], messages[0], messages[4]):
        acks.ack(m)
    await acks.drain()
    assert channel.write_queue.qsize() == 1
    frame = channel.write_queue.get_nowait()
    assert frame.payload == ack_frame(3, 2, True) + ack_frame(3, 5, False)


async def test_a_channel_whose_connection_died_does_not_hold_up_its_successor() -> None:
    """The old connection's writer is gone and its queue full; the new channel's acks
    still leave, and the old channel's flusher gives up once its connection is closed."""
    old, new = FakeChannel(1, room=1), FakeChannel(1)
    old.write_queue.put_nowait(ChannelFrame(payload=b"stuck", should_close=False))
    acks = AckBatcher()
    stuck, fresh = message(old, 7), message(new, 1)
    acks.delivered(stuck)
    acks.ack(stuck)
    await asyncio.sleep(0.05)  # its flusher now waits for room that never comes
    acks.delivered(fresh)
    acks.ack(fresh)
    for _ in range(50):
        if not new.write_queue.empty():
            break
        await asyncio.sleep(0.01)
    assert new.write_queue.get_nowait().payload == ack_frame(1, 1, True)
    old.connection.is_closed = True
    await asyncio.wait_for(acks.drain(), WRITE_WAIT_SECONDS * 3)
    assert old.write_queue.qsize() == 1  # nothing more was queued on it
