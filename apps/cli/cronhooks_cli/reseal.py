"""`cronhooks secrets reseal`: every sealed value stored, sealed again under the current
CRONHOOKS_SECRET_KEY (the second half of a key rotation; docs/deployment.md).

Table by table, in batches of rows taken in key order and locked (`for update`) for the
batch's transaction, each batch committed: a run stopped half-way keeps what it did, and a
rerun finds those values current and leaves them alone (`SecretBox.resealed`). Running
services keep working meanwhile: a writer of a locked row waits for the batch (a few
milliseconds), then writes over the resealed row with its own values, sealed under the
current key; a reader sees the row before or after, and opens either with the current or
a previous key. Caches keyed by sealed values (the dispatcher's `SigningKeys`) see a new
value and open it once more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg
import structlog

from cronhooks_common.crypto import SecretBox

log = structlog.get_logger(__name__)

BATCH = 500


@dataclass(frozen=True, slots=True)
class SealedTable:
    """A table holding sealed values: its key column (and its SQL type) and the columns
    that hold sealed values (bytea, null where there is none)."""

    name: str
    key: str
    key_type: str
    columns: tuple[str, ...]

    def batch_sql(self) -> str:
        return (
            f"select {self.key} as key, {', '.join(self.columns)} from {self.name}"
            f" where $1::{self.key_type} is null or {self.key} > $1::{self.key_type}"
            f" order by {self.key} limit $2 for update"
        )

    def update_sql(self) -> str:
        sets = ", ".join(f"{c} = ${i}" for i, c in enumerate(self.columns, start=2))
        return f"update {self.name} set {sets} where {self.key} = $1"


# Every place a sealed value is stored (a test checks that no other bytea column exists).
SEALED_TABLES = (
    SealedTable(
        "shared.webhook_secrets",
        "webhook_id",
        "bigint",
        ("ciphertext", "private_key", "previous_ciphertext", "previous_private_key"),
    ),
    SealedTable("shared.signing_keys", "kid", "text", ("private_key",)),
    SealedTable("shared.secret_key_probe", "id", "boolean", ("sealed",)),
)


@dataclass
class Counts:
    """What a run did to one table's values."""

    resealed: int = 0
    current: int = 0  # already sealed under the current key
    unreadable: int = 0  # opened by no configured key: left as they are


@dataclass
class Report:
    tables: dict[str, Counts] = field(default_factory=dict)

    @property
    def unreadable(self) -> int:
        return sum(c.unreadable for c in self.tables.values())


async def reseal(conn: asyncpg.Connection, box: SecretBox, *, batch: int = BATCH) -> Report:
    """Seal every stored value again under the current key; what was done, per table."""
    report = Report()
    for table in SEALED_TABLES:
        report.tables[table.name] = await _reseal_table(conn, box, table, batch)
    return report


async def _reseal_table(
    conn: asyncpg.Connection, box: SecretBox, table: SealedTable, batch: int
) -> Counts:
    counts = Counts()
    after: object = None
    while True:
        async with conn.transaction():
            rows = await conn.fetch(table.batch_sql(), after, batch)
            changed = [_resealed_row(box, table, row, counts) for row in rows]
            updates = [args for args in changed if args is not None]
            if updates:
                await conn.executemany(table.update_sql(), updates)
        if len(rows) < batch:
            log.info("secrets_resealed", table=table.name, **vars(counts))
            return counts
        after = rows[-1]["key"]


def _resealed_row(
    box: SecretBox, table: SealedTable, row: asyncpg.Record, counts: Counts
) -> tuple[object, ...] | None:
    """The row's update arguments (key, then every column), or None if nothing changes."""
    values: list[bytes | None] = []
    for column in table.columns:
        sealed: bytes | None = row[column]
        new = None
        if sealed is not None:
            try:
                new = box.resealed(sealed)
            except ValueError:
                counts.unreadable += 1
            else:
                counts.current += new is None
                counts.resealed += new is not None
        values.append(sealed if new is None else new)
    if values == [row[c] for c in table.columns]:
        return None
    return (row["key"], *values)
