"""What the dispatchers tell of their waiting deliveries (CONTRACT §17, cronhooks_common.
destination_state): each process's rows are replaced by its next tell, the page's counts
sum the live processes, the watchdog's long waits are the live processes' ids, and a
process that stopped telling (killed) drops out within seconds and is pruned later."""

from __future__ import annotations

from cronhooks_common import db, destination_state
from cronhooks_common.destination_state import Waiting

A, B = "https://a.example:443", "http://b.example:80"


async def test_tells_replace_sum_over_live_processes_and_go_stale(database_url: str) -> None:
    pool = await db.create_pool(database_url, name="test", max_size=2)
    try:
        await destination_state.tell_waiting(pool, "p1", {A: Waiting(3, (1, 2)), B: Waiting(1)})
        await destination_state.tell_waiting(pool, "p2", {A: Waiting(0, (5,))})
        assert await destination_state.waiting(pool) == {A: 3, B: 1}
        assert await destination_state.long_waits(pool) == {1, 2, 5}

        # p1's next tell replaces all it told: B no longer waits there
        await destination_state.tell_waiting(pool, "p1", {A: Waiting(2)})
        assert await destination_state.waiting(pool) == {A: 2}
        assert await destination_state.long_waits(pool) == {5}

        # p2 stopped telling (killed): stale after FRESH_SECONDS, pruned some time later
        stale = f"now() - interval '{destination_state.FRESH_SECONDS + 1} seconds'"
        await pool.execute(
            f"update shared.destination_waiting set seen_at = {stale} where process = 'p2'"
        )
        assert await destination_state.long_waits(pool) == frozenset()
        await destination_state.prune_waiting(pool)
        assert await pool.fetchval("select count(*) from shared.destination_waiting") == 2
        await pool.execute(
            "update shared.destination_waiting set seen_at = now() - interval '1 hour'"
            " where process = 'p2'"
        )
        await destination_state.prune_waiting(pool)
        assert await pool.fetchval("select count(*) from shared.destination_waiting") == 1

        await destination_state.tell_waiting(pool, "p1", {})  # nothing waits: no rows
        assert await destination_state.waiting(pool) == {}
        assert await pool.fetchval("select count(*) from shared.destination_waiting") == 0
    finally:
        await pool.close()
