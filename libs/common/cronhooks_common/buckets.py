"""Which partition holds a delivery's rows (retention, CONTRACT §12).

Delivery data is partitioned by ranges of delivery id, the same bucket bounds in every
bucketed table (`eventstore.bucketed_tables`). A statement through the partitioned parent
costs the hot path: asyncpg's prepared statements run generic plans, and a generic plan
locks and starts every partition although it reads one (`python -m bench retention
--lookups`). So the hot path's reads name the partition itself, found here from the
delivery id that every stream name carries ("delivery-42"; other streams are kept).

Bounds never change once a bucket exists, so a cached map stays true for every id it
covers. An id above the map (a bucket opened since) refreshes it; an id in no bucket of a
fresh map is in the default partition, or gone with a dropped bucket.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import asyncpg

KEPT = "kept"  # partition suffix of the streams kept forever (delivery id 0)
DEFAULT = "default"  # ids beyond every bucket (kept empty by the spare bucket ahead)
K = TypeVar("K")
R = TypeVar("R")
REFRESH_SECONDS = 60.0  # a dropped bucket is noticed this late at most (its reads then fail over)


def delivery_of(stream: str) -> int:
    """The delivery id of a stream (0 for the streams kept forever), as
    `eventstore.delivery_of` computes it in SQL."""
    if stream.startswith("delivery-"):
        tail = stream[len("delivery-") :]
        if tail.isdigit():
            return int(tail)
    return 0


def partition(table: str, suffix: str) -> str:
    """`eventstore.events`, `b7` → `eventstore.events_b7` (names are ours, never input)."""
    return f"{table}_{suffix}"


@dataclass(frozen=True, slots=True)
class BucketMap:
    """Sorted bucket bounds: `los[i]` ≤ id < `his[i]` is bucket `numbers[i]`."""

    numbers: tuple[int, ...]
    los: tuple[int, ...]
    his: tuple[int, ...]

    @classmethod
    def of(cls, rows: Iterable[tuple[int, int, int]]) -> BucketMap:
        ordered = sorted(rows, key=lambda r: r[1])
        return cls(
            tuple(r[0] for r in ordered), tuple(r[1] for r in ordered), tuple(r[2] for r in ordered)
        )

    def suffix(self, delivery_id: int) -> str | None:
        """The partition suffix for `delivery_id`; None if above every bucket."""
        if delivery_id <= 0:
            return KEPT
        i = bisect.bisect_right(self.los, delivery_id) - 1
        if i >= 0 and delivery_id < self.his[i]:
            return f"b{self.numbers[i]}"
        if not self.his or delivery_id >= self.his[-1]:
            return None
        return DEFAULT  # in a gap: a dropped bucket (nothing there) or never bucketed


async def load_map(conn: asyncpg.Connection | asyncpg.Pool) -> BucketMap:
    rows = await conn.fetch("select bucket, lo, hi from eventstore.buckets")
    return BucketMap.of((r["bucket"], r["lo"], r["hi"]) for r in rows)


class Router:
    """A process's cached bucket map. `suffixes` answers for many ids at once and reads the
    map again only when one is above it (or the map is older than REFRESH_SECONDS)."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._map: BucketMap | None = None
        self._loaded_at = 0.0
        self._monotonic = monotonic

    async def suffixes(
        self, conn: asyncpg.Connection | asyncpg.Pool, delivery_ids: Iterable[int]
    ) -> list[str]:
        ids = list(delivery_ids)
        stale = self._map is None or self._monotonic() - self._loaded_at > REFRESH_SECONDS
        if not stale and all(i <= 0 for i in ids):
            return [KEPT] * len(ids)
        if stale or any(self._map.suffix(i) is None for i in ids):  # type: ignore[union-attr]
            await self.refresh(conn)
        current = self._map
        assert current is not None
        return [current.suffix(i) or DEFAULT for i in ids]

    async def refresh(self, conn: asyncpg.Connection | asyncpg.Pool) -> None:
        self._map = await load_map(conn)
        self._loaded_at = self._monotonic()

    def forget(self) -> None:
        """A routed statement met a dropped partition: read the map again next time."""
        self._map = None


async def fetch_routed(
    conn: asyncpg.Connection | asyncpg.Pool,
    router: Router,
    keys: list[K],
    delivery_id: Callable[[K], int],
    fetch: Callable[[str, list[K]], Awaitable[list[R]]],
) -> list[R]:
    """`fetch(suffix, keys)` once per partition the keys fall in (one, nearly always).

    A partition dropped since the map was read raises UndefinedTableError: outside a
    transaction the map is read again and the keys asked again; inside one (it is aborted)
    the error goes up with the map forgotten, so the caller's retry routes afresh."""
    for again in (True, False):
        suffixes = await router.suffixes(conn, [delivery_id(k) for k in keys])
        groups: dict[str, list[K]] = {}
        for key, suffix in zip(keys, suffixes, strict=True):
            groups.setdefault(suffix, []).append(key)
        try:
            rows: list[R] = []
            for suffix, group in groups.items():
                rows += await fetch(suffix, group)
            return rows
        except asyncpg.UndefinedTableError:
            router.forget()
            in_tx = isinstance(conn, asyncpg.Connection) and conn.is_in_transaction()
            if not again or in_tx:
                raise
    raise AssertionError("unreachable")
