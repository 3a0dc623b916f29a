"""One socket write for the AMQP frames that are ready together (a publish round, the acks
of a batch), instead of one write per frame.

aiormq's connection writer takes one frame from its queue and writes it, then the next:
a publish round of a thousand events is a thousand `send` calls, and on this hot path a
send costs more than marshalling the frame. `install()` makes its frame iterator hand the
writer everything already queued as one frame: the bytes concatenated in queue order (so
the broker sees exactly the same stream), the flags kept — a frame that must be drained
(its publisher waits for the write) is drained after the combined write, a close frame
ends the combination and closes as before.

It replaces one method of aiormq's `FrameGenerator`, so it checks the version it was
written for (`cronhooks_common.broker` installs it at import); any other version runs
aiormq's own writer unchanged and logs that.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

import structlog
from aiormq import connection as aiormq_connection
from aiormq.abc import ChannelFrame

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


def install() -> bool:
    """Combine queued frames in aiormq's writer; False (and a log line) if not installed."""
    found = version("aiormq")
    if found != FOR_AIORMQ:
        log.warning("amqp_write_combining_off", aiormq=found, written_for=FOR_AIORMQ)
        return False
    aiormq_connection.FrameGenerator.__anext__ = _combining_anext  # type: ignore[method-assign,assignment]
    return True
