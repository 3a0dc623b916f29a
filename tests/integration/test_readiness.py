"""/readyz says why a service is not ready: database, broker or migrations."""

from __future__ import annotations

import uuid

import asyncpg

from cronhooks_common import broker, db
from cronhooks_common.ops import readiness
from tests.conftest import RUN_ID, _drop_database, dsn_for


async def test_ready_when_everything_answers(
    pool: asyncpg.Pool, amqp: broker.AbstractRobustConnection
) -> None:
    assert await readiness(pool, amqp) is None


async def test_pending_migrations_make_it_unready(amqp: broker.AbstractRobustConnection) -> None:
    name = f"cronhooks_test_{RUN_ID}_ready_{uuid.uuid4().hex[:6]}"
    admin = await asyncpg.connect(dsn_for("postgres"))
    await admin.execute(f'create database "{name}"')
    await admin.close()
    pool = await db.create_pool(dsn_for(name), name="ready", min_size=1, max_size=2)
    try:
        reason = await readiness(pool, amqp)
        assert reason is not None and reason.startswith("migrations: ")
        assert "pending" in reason
    finally:
        await pool.close()
        await _drop_database(name)


async def test_lost_broker_makes_it_unready(pool: asyncpg.Pool, amqp_url: str) -> None:
    conn = await broker.connect(amqp_url, name="ready")
    await conn.close()
    assert await readiness(pool, conn) == "rabbitmq: not connected"


async def test_lost_database_makes_it_unready(
    pool: asyncpg.Pool, amqp: broker.AbstractRobustConnection
) -> None:
    await pool.close()
    reason = await readiness(pool, amqp)
    assert reason is not None and reason.startswith("postgres: ")
