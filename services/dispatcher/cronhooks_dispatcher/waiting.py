"""Attempts that wait for the importer's verdict on their note changes (CONTRACT §4):
rows of dispatcher.attempts, kept by the record that says changes were received
(record.py), read when the verdict comes (finish.py) and forgotten with its record. That
is all the table is for: every finished attempt lives in its outcome event (and
admin-api's attempt log, projected from it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import asyncpg
import msgspec

from cronhooks_common import agent_report
from cronhooks_common.events import DeliveryReleased, DeliveryRequested, RequestFields
from cronhooks_dispatcher import queries

if TYPE_CHECKING:  # the type only: record.py imports this module
    from cronhooks_dispatcher.attempt import Attempt


async def keep(conn: asyncpg.Connection, attempts: Sequence[Attempt]) -> None:
    if attempts:
        await conn.execute(
            queries.KEEP_WAITING,
            [a.request.delivery_id for a in attempts],
            [a.request.attempt for a in attempts],
            [a.request.webhook_id for a in attempts],
            [a.started_at for a in attempts],
            [a.duration_ms for a in attempts],
            [a.request_body for a in attempts],
            [a.response_status for a in attempts],
            [a.response_body for a in attempts],
            [a.request.to_data() for a in attempts],
            [a.request_body_truncated for a in attempts],
            # its costs and logs, for the outcome event the importer's verdict brings
            [agent_report.to_data(a.report) for a in attempts],
        )


async def forget(conn: asyncpg.Connection, attempts: Sequence[Attempt]) -> None:
    if attempts:
        await conn.execute(
            queries.FORGET_WAITING,
            [a.request.delivery_id for a in attempts],
            [a.request.attempt for a in attempts],
        )


async def forget_delivery(conn: asyncpg.Connection, delivery_id: int) -> None:
    """A delivery another service ended: whatever of it waited waits no more."""
    await conn.execute(queries.FORGET_DELIVERY_ATTEMPTS, delivery_id)


async def find(pool: asyncpg.Pool, delivery_id: int, attempt: int) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await pool.fetchrow(queries.WAITING_ATTEMPT, delivery_id, attempt)
    return row


def request_of(kept: object) -> RequestFields:
    """The request a kept attempt was sent for: a release names the group it holds (rows
    kept before requests were typed lack its `queued_ms`)."""
    assert isinstance(kept, dict)
    if "queued_ms" in kept or "execution_group" in kept:
        return msgspec.convert({"queued_ms": 0, **kept}, DeliveryReleased)
    return msgspec.convert(kept, DeliveryRequested)
