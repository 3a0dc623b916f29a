"""The commands about the keys at rest: `cronhooks secrets reseal` (every sealed value under
the current CRONHOOKS_SECRET_KEY) and `cronhooks keys rotate` (a new JWT signing key), each
refusing to seal anything with a key that cannot open the database's secrets (the probe,
cronhooks_common.secret_probe)."""

from __future__ import annotations

import sys

from cronhooks_common.settings import Settings

CONFIGURATION_ERROR = 2  # as cli.py's: the same settings would fail the same way again


async def check_secret_key(settings: Settings) -> None:
    """The secret key probe (secret_probe.py): written on first use, opened every time."""
    from cronhooks_common import db
    from cronhooks_common.crypto import SecretBox
    from cronhooks_common.secret_probe import check_secret_key

    conn = await db.connect(settings.database_url, name="cli-secrets")
    try:
        await check_secret_key(conn, SecretBox.of(settings), settings.database_url)
    finally:
        await conn.close()


async def reseal_secrets(settings: Settings) -> int:
    from cronhooks_cli.reseal import reseal
    from cronhooks_common import db
    from cronhooks_common.crypto import SecretBox
    from cronhooks_common.secret_probe import SecretKeyMismatch

    try:
        await check_secret_key(settings)
    except SecretKeyMismatch as exc:
        print(f"cronhooks secrets reseal: {exc}", file=sys.stderr)
        return CONFIGURATION_ERROR
    conn = await db.connect(settings.database_url, name="cli-secrets")
    try:
        report = await reseal(conn, SecretBox.of(settings))
    finally:
        await conn.close()
    for table, counts in report.tables.items():
        print(
            f"{table}: {counts.resealed} resealed, {counts.current} already current,"
            f" {counts.unreadable} unreadable"
        )
    if report.unreadable:
        print(
            f"cronhooks secrets reseal: {report.unreadable} values open with no configured"
            " key: add the key that sealed them to CRONHOOKS_SECRET_KEY_PREVIOUS and run"
            " it again",
            file=sys.stderr,
        )
        return 1
    if settings.secret_key_previous:
        print(
            "every secret is sealed under CRONHOOKS_SECRET_KEY: remove"
            " CRONHOOKS_SECRET_KEY_PREVIOUS (from .env or the environment) and restart"
            " the services"
        )
    return 0


async def rotate_keys(settings: Settings) -> int:
    from datetime import UTC, datetime

    from cronhooks_common import db
    from cronhooks_common.crypto import SecretBox
    from cronhooks_common.keys import rotate
    from cronhooks_common.secret_probe import SecretKeyMismatch

    try:  # a key sealed with a wrong key would be one no service can open
        await check_secret_key(settings)
    except SecretKeyMismatch as exc:
        print(f"cronhooks keys rotate: {exc}", file=sys.stderr)
        return CONFIGURATION_ERROR
    algorithm = settings.fire_jwt_algorithm
    conn = await db.connect(settings.database_url, name="keys")
    try:
        retired, new = await rotate(
            conn, SecretBox.of(settings), algorithm=algorithm, now=datetime.now(UTC)
        )
    finally:
        await conn.close()
    print(f"retired key {retired or '(none)'}; signing now with {new} ({algorithm})")
    return 0
