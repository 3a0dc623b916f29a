"""A wrong CRONHOOKS_SECRET_KEY is found at start (secret_probe.py) on the real Postgres:
the probe is written once, by whichever first start wins, and opened by every later one;
a database from before the probe is checked against a value it already holds."""

from __future__ import annotations

import asyncio

import pytest

from cronhooks_cli.reseal import SEALED_TABLES
from cronhooks_common import db
from cronhooks_common.crypto import SecretBox
from cronhooks_common.secret_probe import SecretKeyMismatch, check_secret_key

A = "key-a-0123456789abcdef0123456789abcdef"
B = "key-b-0123456789abcdef0123456789abcdef"


async def check(dsn: str, box: SecretBox) -> bool:
    conn = await db.connect(dsn, name="probe")
    try:
        await check_secret_key(conn, box, dsn)
    except SecretKeyMismatch as exc:
        assert "CRONHOOKS_SECRET_KEY" in str(exc) and ".env" in str(exc)
        return False
    finally:
        await conn.close()
    return True


async def probe_rows(dsn: str) -> int:
    conn = await db.connect(dsn, name="probe")
    try:
        return int(await conn.fetchval("select count(*) from shared.secret_key_probe"))
    finally:
        await conn.close()


async def test_the_first_key_is_recorded_and_only_it_or_a_box_with_it_as_previous_opens(
    database_url: str,
) -> None:
    assert await probe_rows(database_url) == 0
    assert await check(database_url, SecretBox(A))
    assert await check(database_url, SecretBox(A))
    assert not await check(database_url, SecretBox(B))
    assert await check(database_url, SecretBox(B, [A]))
    assert await probe_rows(database_url) == 1


async def test_concurrent_first_starts_agree_on_one_probe(database_url: str) -> None:
    keys = [A, B] * 4
    opened = await asyncio.gather(*(check(database_url, SecretBox(k)) for k in keys))
    assert await probe_rows(database_url) == 1
    winner = {k for k, ok in zip(keys, opened, strict=True) if ok}
    assert len(winner) == 1, opened  # every start with the winner's key passes, no other
    assert opened.count(True) == 4


async def test_a_database_from_before_the_probe_is_checked_against_a_stored_secret(
    database_url: str,
) -> None:
    conn = await db.connect(database_url, name="probe")
    try:
        await conn.execute(
            "insert into shared.webhook_secrets (webhook_id, ciphertext) values (1, $1)",
            SecretBox(A).seal("whsec_old"),
        )
    finally:
        await conn.close()
    assert not await check(database_url, SecretBox(B))
    assert await probe_rows(database_url) == 0, "a wrong key records nothing"
    assert await check(database_url, SecretBox(A))
    assert not await check(database_url, SecretBox(B))


async def test_every_bytea_column_is_one_the_reseal_knows(database_url: str) -> None:
    """A sealed value stored anywhere else would be left under the old key by a reseal."""
    conn = await db.connect(database_url, name="probe")
    try:
        rows = await conn.fetch(
            "select table_schema || '.' || table_name as t, column_name as c"
            " from information_schema.columns where data_type = 'bytea'"
            " and table_schema not in ('pg_catalog', 'information_schema')"
        )
    finally:
        await conn.close()
    found = {(r["t"], r["c"]) for r in rows}
    known = {(t.name, c) for t in SEALED_TABLES for c in t.columns}
    assert found == known


@pytest.mark.parametrize("previous", [(), (B,)])
async def test_a_previous_key_does_not_change_which_key_seals_the_probe(
    database_url: str, previous: tuple[str, ...]
) -> None:
    assert await check(database_url, SecretBox(A, previous))
    assert await check(database_url, SecretBox(A))
