"""The watchdog's SQL (watchdog.py says what each is for)."""

from __future__ import annotations

# One replica steps at a time; the others skip instead of queueing behind it.
TAKE_CHECKPOINT = """
select txid, position from scheduler.watchdog_checkpoint for update skip locked
"""

MOVE_CHECKPOINT = """
update scheduler.watchdog_checkpoint set txid = $1, position = $2
"""

# The delivery streams' events (every bucket partition, not the kept one) in commit order
# below the watermark (cronhooks_common.tail), with the two values a deadline needs. The
# CASEs read the event's data only for the few types that carry them: an outcome's data
# holds the attempt's bodies, which this never needs.
READ = """
select txid, position, stream, version, type, occurred_at,
       case when type in ('delivery.requested', 'delivery.released')
            then (data->'target'->>'timeout_seconds')::int end as timeout_seconds,
       case when type = 'delivery.attempt_failed' then data->>'retry_at' end as retry_at
from eventstore.events
where delivery_id > 0 and (txid, position) > ($1, $2) and txid < {watermark}
order by txid, position
limit $3
"""

LOAD = """
select stream, version, timeout_ms, deadline from scheduler.watched
where stream = any($1::text[])
"""

KEEP = """
insert into scheduler.watched (stream, version, timeout_ms, deadline)
select * from unnest($1::text[], $2::int[], $3::int[], $4::timestamptz[])
on conflict (stream) do update set
    version = excluded.version, timeout_ms = excluded.timeout_ms, deadline = excluded.deadline
"""

FORGET = """
delete from scheduler.watched where stream = any($1::text[])
"""

OVERDUE = """
select stream, version, deadline from scheduler.watched
where deadline <= $1
order by deadline
limit $2
"""

EARLIEST = """
select min(deadline) from scheduler.watched
"""
