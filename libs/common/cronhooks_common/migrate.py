"""Numbered `.sql` migrations per component, applied once under an advisory lock.

Each component (the shared library and every service) keeps its files in its own
``migrations/`` package directory as ``NNNN_name.sql``. `cronhooks migrate` applies the
missing ones in order, each in its own transaction, while holding a Postgres advisory
lock: concurrent runs queue behind each other and a second run finds nothing to do.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.metadata import entry_points
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import structlog

log = structlog.get_logger(__name__)

# The services register their migrations under this entry-point group (pyproject.toml), so
# this library names none of them (libs/ imports no service).
ENTRY_POINTS = "cronhooks.migrations"
SHARED = "cronhooks_common"
MIGRATION_LOCK = 0x63726F6E_6D696772  # "cronmigr"
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Migration:
    component: str
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def components() -> tuple[str, ...]:
    """The shared library first (the services' schemas build on it), then the registered
    components by name (none refers to another's schema)."""
    registered = sorted({ep.value for ep in entry_points(group=ENTRY_POINTS)} - {SHARED})
    if not registered:
        raise MigrationError(
            f"no {ENTRY_POINTS} entry points: is cronhooks installed (make install)?"
        )
    return (SHARED, *registered)


def available_migrations() -> list[Migration]:
    found = []
    for component in components():
        folder = resources.files(component) / "migrations"
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            match = _FILE.match(entry.name)
            if match:
                found.append(
                    Migration(component, int(match[1]), match[2], entry.read_text("utf-8"))
                )
    return found


_CREATE_TABLE = """
create table if not exists public.cronhooks_migrations (
    component   text        not null,
    version     integer     not null,
    name        text        not null,
    checksum    text        not null,
    applied_at  timestamptz not null default now(),
    primary key (component, version)
)
"""


async def pending_migrations(conn: asyncpg.Connection) -> list[Migration]:
    """Migrations not yet applied (all of them if the bookkeeping table is missing)."""
    exists = await conn.fetchval("select to_regclass('public.cronhooks_migrations') is not null")
    applied: set[tuple[str, int]] = set()
    if exists:
        rows = await conn.fetch("select component, version from public.cronhooks_migrations")
        applied = {(r["component"], r["version"]) for r in rows}
    return [m for m in available_migrations() if (m.component, m.version) not in applied]


async def migrate(dsn: str) -> list[Migration]:
    """Create the database if needed and apply every pending migration; return those applied."""
    await ensure_database(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("select pg_advisory_lock($1)", MIGRATION_LOCK)
        try:
            await conn.execute(_CREATE_TABLE)
            applied_rows = await conn.fetch(
                "select component, version, checksum from public.cronhooks_migrations"
            )
            applied = {(r["component"], r["version"]): r["checksum"] for r in applied_rows}
            done = []
            for migration in available_migrations():
                key = (migration.component, migration.version)
                if key in applied:
                    if applied[key] != migration.checksum:
                        raise MigrationError(
                            f"{migration.component} migration {migration.version:04d}_"
                            f"{migration.name} was changed after it was applied"
                        )
                    continue
                async with conn.transaction():
                    await conn.execute(migration.sql)
                    await conn.execute(
                        "insert into public.cronhooks_migrations"
                        " (component, version, name, checksum) values ($1, $2, $3, $4)",
                        migration.component,
                        migration.version,
                        migration.name,
                        migration.checksum,
                    )
                log.info(
                    "migration_applied",
                    component=migration.component,
                    version=migration.version,
                    name=migration.name,
                )
                done.append(migration)
            return done
        finally:
            await conn.execute("select pg_advisory_unlock($1)", MIGRATION_LOCK)
    finally:
        await conn.close()


async def ensure_database(dsn: str) -> None:
    """Create the database named in `dsn` if it does not exist yet."""
    try:
        conn = await asyncpg.connect(dsn)
    except asyncpg.InvalidCatalogNameError:
        pass
    else:
        await conn.close()
        return
    parts = urlsplit(dsn)
    name = parts.path.lstrip("/")
    admin = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        await admin.execute(f'create database "{name}"')
        log.info("database_created", database=name)
    except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
        pass  # created concurrently by another migrate run (either error, by timing)
    finally:
        await admin.close()
