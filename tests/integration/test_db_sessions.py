"""The session settings every service connection gets (db.server_settings)."""

from __future__ import annotations

import asyncpg

from cronhooks_common import db


async def test_pool_and_single_connections_run_without_jit(database_url: str) -> None:
    # JIT compiled the live tail's short reads for 30 ms to 1.3 s a call in a herd,
    # triggered by estimates over partitions not analyzed yet (db.server_settings).
    pool = await db.create_pool(database_url, name="jit-check", min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("show jit") == "off"
            assert await conn.fetchval("show application_name") == "cronhooks-jit-check"
    finally:
        await pool.close()
    single: asyncpg.Connection = await db.connect(database_url, name="jit-listen")
    try:
        assert await single.fetchval("show jit") == "off"
        assert await single.fetchval("show application_name") == "cronhooks-jit-listen"
    finally:
        await single.close()
