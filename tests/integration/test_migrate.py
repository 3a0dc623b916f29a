from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from cronhooks_common.migrate import (
    MigrationError,
    available_migrations,
    migrate,
    pending_migrations,
)
from tests.conftest import RUN_ID, _drop_database, dsn_for


@pytest.fixture
async def empty_dsn():  # type: ignore[no-untyped-def]
    name = f"cronhooks_test_{RUN_ID}_mig_{uuid.uuid4().hex[:6]}"
    yield dsn_for(name)
    await _drop_database(name)


async def test_concurrent_runs_apply_each_migration_once(empty_dsn: str) -> None:
    results = await asyncio.gather(*(migrate(empty_dsn) for _ in range(4)))
    applied = [m for result in results for m in result]
    assert len(applied) == len(available_migrations())
    assert len({(m.component, m.version) for m in applied}) == len(applied)
    assert await migrate(empty_dsn) == []  # a second run is a no-op
    conn = await asyncpg.connect(empty_dsn)
    try:
        assert await pending_migrations(conn) == []
        rows = await conn.fetchval("select count(*) from public.cronhooks_migrations")
        assert rows == len(available_migrations())
    finally:
        await conn.close()


async def test_a_changed_applied_migration_is_refused(empty_dsn: str) -> None:
    await migrate(empty_dsn)
    conn = await asyncpg.connect(empty_dsn)
    try:
        await conn.execute(
            "update public.cronhooks_migrations set checksum = 'x' where version = 1"
            " and component = 'cronhooks_common'"
        )
    finally:
        await conn.close()
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await migrate(empty_dsn)


async def test_unmigrated_database_reports_everything_pending(empty_dsn: str) -> None:
    admin = await asyncpg.connect(dsn_for("postgres"))
    await admin.execute(f'create database "{empty_dsn.rsplit("/", 1)[1]}"')
    await admin.close()
    conn = await asyncpg.connect(empty_dsn)
    try:
        assert len(await pending_migrations(conn)) == len(available_migrations())
    finally:
        await conn.close()
