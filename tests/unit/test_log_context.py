"""Ids bound with `logs.bound` ride on every line logged inside the block: the service's own
lines and the standard library's records, in tasks started inside it too; an inner block
wins over an outer one, a line's own keyword over both, and nothing is left behind after
the block. Run in a child interpreter: configuring logging is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import asyncio, logging, uuid
import structlog
from cronhooks_common import logs

logs.configure_logging("probe")
log = structlog.get_logger("probe")
event_id = uuid.UUID("6f1c2d54-6a57-4b0e-9d7e-2f3f8f0f6f1b")

async def in_task():
    await asyncio.sleep(0)
    log.info("in_task")

async def main():
    with logs.bound(event_id=event_id, delivery_id=1):
        log.info("outer")
        with logs.bound(delivery_id=2, webhook_id=7):
            log.info("inner")
            log.info("own", webhook_id=8)
            task = asyncio.create_task(in_task())
        await task  # started inside the inner block, runs on after it ended
        with logs.bound(delivery_id=2, webhook_id=7):
            logging.getLogger("lib").warning("stdlib")
        log.info("outer_again")
    log.info("after")

asyncio.run(main())
"""


def test_bound_ids_ride_on_every_line_inside_the_block_only() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    lines = {line["event"]: line for line in map(json.loads, out.stderr.splitlines())}
    ids = ("event_id", "delivery_id", "webhook_id")

    def bound(name: str) -> dict[str, object]:
        return {k: lines[name][k] for k in ids if k in lines[name]}

    event_id = "6f1c2d54-6a57-4b0e-9d7e-2f3f8f0f6f1b"  # a UUID is written as its text
    assert bound("outer") == {"event_id": event_id, "delivery_id": 1}
    assert bound("inner") == {"event_id": event_id, "delivery_id": 2, "webhook_id": 7}
    assert bound("own") == {"event_id": event_id, "delivery_id": 2, "webhook_id": 8}
    assert bound("in_task") == {"event_id": event_id, "delivery_id": 2, "webhook_id": 7}
    assert bound("stdlib") == {"event_id": event_id, "delivery_id": 2, "webhook_id": 7}
    assert bound("outer_again") == {"event_id": event_id, "delivery_id": 1}
    assert bound("after") == {}
    assert all(line["service"] == "probe" for line in lines.values())
