"""Finding a wrong CRONHOOKS_SECRET_KEY at start (CONTRACT §1): one sealed probe row in
`shared.secret_key_probe`, written once with the key of the first process that finds
none, opened by every process before it takes any work.

A database made before the probe existed may already hold sealed values: the first
process then checks one of them before it writes the probe, so the probe never records a
wrong key.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg

from cronhooks_common.crypto import SecretBox

PROBE_TEXT = "cronhooks secret key probe"

_PROBE = "select sealed from shared.secret_key_probe"
_INSERT = "insert into shared.secret_key_probe (sealed) values ($1) on conflict do nothing"
# Any value sealed before the probe existed (a database from an older version).
_SAMPLE = """
(select ciphertext from shared.webhook_secrets limit 1)
union all
(select private_key from shared.signing_keys limit 1)
limit 1
"""


async def _has_secrets(conn: asyncpg.Connection) -> bool:
    found: bool = await conn.fetchval(
        "select to_regclass('shared.webhook_secrets') is not null"
        " and to_regclass('shared.signing_keys') is not null"
    )
    return found


class SecretKeyMismatch(RuntimeError):
    """The configured keys cannot open what this database holds. Its message is the one
    line a process prints before it exits."""


def mismatch_line(database_url: str) -> str:
    """What to do, in one line: the variable, .env, and the two ways out."""
    parts = urlsplit(database_url)
    where = f"{parts.hostname}:{parts.port or 5432}{parts.path}"
    return (
        f"CRONHOOKS_SECRET_KEY cannot open the secrets stored in the database {where}:"
        " it is not the key this database was created with. Set CRONHOOKS_SECRET_KEY"
        " (in .env or the environment) to that key, or, to change keys, set the old one"
        " in CRONHOOKS_SECRET_KEY_PREVIOUS and run `cronhooks secrets reseal`"
        " (docs/deployment.md, key rotation)"
    )


def opens(box: SecretBox, sealed: bytes) -> bool:
    try:
        box.open(sealed)
    except ValueError:
        return False
    return True


async def check_secret_key(conn: asyncpg.Connection, box: SecretBox, database_url: str) -> None:
    """Open the probe (write it first if there is none); SecretKeyMismatch if `box` cannot.
    Before migration 0028 (a process started ahead of `cronhooks migrate`), one of the
    sealed values stored, if any, stands in for the probe."""
    migrated = await conn.fetchval("select to_regclass('shared.secret_key_probe') is not null")
    sealed: bytes | None = await conn.fetchval(_PROBE) if migrated else None
    if sealed is None:
        older = await conn.fetchval(_SAMPLE) if await _has_secrets(conn) else None
        if older is not None and not opens(box, older):
            raise SecretKeyMismatch(mismatch_line(database_url))
        if not migrated:
            return
        await conn.execute(_INSERT, box.seal(PROBE_TEXT))
        sealed = await conn.fetchval(_PROBE)  # this process's, or a concurrent first's
        assert sealed is not None
    if not opens(box, sealed):
        raise SecretKeyMismatch(mismatch_line(database_url))
