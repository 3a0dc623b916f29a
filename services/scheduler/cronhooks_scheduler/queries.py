"""Every statement the scheduler runs, in one place; the modules that run them say why.

Statements with a `{…}` field are completed with `.format` by their caller, with names
of our own (a partition, the tail's watermark, a midnight), never with input.
"""

from __future__ import annotations

# Wakes the loops at commit on every replica (loop.py): any change to a timer.
NOTIFY = "select pg_notify($1, '')"

# -- timers (timers.py, retries.py, triggers.py) --------------------------------------

EARLIEST_TIMER = "select min(due_at) from scheduler.timers"

# While deliveries are paused (CONTRACT §16.4) the kinds that send something wait, due,
# for the resume: retries and agent-cron fires (`HELD`); cron timers go on firing (their
# slots skipped), and so would a kind that sends nothing.
HELD = "('retry', 'trigger', 'fire_retry')"
EARLIEST_TIMER_WHILE_PAUSED = f"select min(due_at) from scheduler.timers where kind not in {HELD}"

DELETE_TIMER = "delete from scheduler.timers where timer_key = $1"

SET_CRON_TIMER = """
insert into scheduler.timers (timer_key, kind, subject, due_at)
values ($1, 'cron', $2, $3)
on conflict (timer_key) do update set due_at = excluded.due_at
"""

SHIFT_TIMER = "update scheduler.timers set due_at = due_at + $2 where timer_key = $1"

ADD_RETRY = """
insert into scheduler.timers (timer_key, kind, subject, due_at, payload)
values ($1, 'retry', $2, $3, $4)
on conflict (timer_key) do nothing
"""

# A newer arming (a higher generation) replaces the due time in place; an older one that
# arrives late changes nothing.
ARM_TRIGGER = """
insert into scheduler.timers (timer_key, kind, subject, due_at, payload)
values ($1, 'trigger', $2, $3, $4)
on conflict (timer_key) do update set due_at = excluded.due_at,
    payload = excluded.payload
where (scheduler.timers.payload->>'generation')::int
      < (excluded.payload->>'generation')::int
"""

CANCEL_TRIGGER = """
delete from scheduler.timers where timer_key = $1 and (payload->>'generation')::int <= $2
"""

ADD_FIRE_RETRY = """
insert into scheduler.timers (timer_key, kind, subject, due_at, payload)
values ($1, 'fire_retry', $2, $3, $4)
on conflict (timer_key) do nothing
"""

# -- the scheduler's copy of each webhook (timers.py) ---------------------------------

LOCK_WEBHOOK = """
select stream_version, config, gone from scheduler.webhooks where webhook_id = $1 for update
"""

SAVE_WEBHOOK = """
insert into scheduler.webhooks (webhook_id, stream_version, config, deleted, gone)
values ($1, $2, $3, $4, $5)
on conflict (webhook_id) do update
    set stream_version = excluded.stream_version,
        config = excluded.config,
        deleted = excluded.deleted,
        gone = excluded.gone
"""

# -- firing due timers (firing.py, slot_events.py, retries.py) ------------------------

# Replicas take disjoint batches. The webhook's copy joins the timers that need it.
CLAIM = """
select t.timer_key, t.kind, t.subject, t.due_at, t.payload, w.config, w.deleted, w.gone
from scheduler.timers t
left join scheduler.webhooks w on w.webhook_id = t.subject and t.kind in ('cron', 'retry')
where t.due_at <= $1
order by t.due_at
limit $2
for update of t skip locked
"""

CLAIM_WHILE_PAUSED = CLAIM.replace(
    "where t.due_at <= $1", f"where t.due_at <= $1 and t.kind not in {HELD}"
)

NEW_DELIVERY_IDS = """
select nextval('eventstore.delivery_ids') as id from generate_series(1, $1)
"""

# Unique per (webhook, slot): a slot another replica (or an earlier try) recorded is not
# returned, and gets no event.
RECORD_SLOTS = """
insert into scheduler.slot_requests (webhook_id, slot, delivery_id)
select * from unnest($1::bigint[], $2::timestamptz[], $3::bigint[])
on conflict (webhook_id, slot) do nothing
returning webhook_id, slot, delivery_id
"""

# Over one partition of the event store ({table}); $1: the streams.
FIRST_EVENTS = "select stream, data from {table} where stream = any($1::text[]) and version = 1"

STREAM_VERSIONS = """
select stream, max(version) from {table} where stream = any($1::text[]) group by stream
"""

DELETE_TIMERS = "delete from scheduler.timers where timer_key = any($1::text[])"

MOVE_TIMERS = """
update scheduler.timers t set due_at = m.due_at
from unnest($1::text[], $2::timestamptz[]) as m(timer_key, due_at)
where t.timer_key = m.timer_key
"""

# -- the watchdog (watchdog.py) --------------------------------------------------------

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
WATCH_READ = """
select txid, position, stream, version, type, occurred_at,
       case when type in ('delivery.requested', 'delivery.released')
            then (data->'target'->>'timeout_seconds')::int end as timeout_seconds,
       case when type = 'delivery.attempt_failed' then data->>'retry_at' end as retry_at
from eventstore.events
where delivery_id > 0 and (txid, position) > ($1, $2) and txid < {watermark}
order by txid, position
limit $3
"""

WATCH_LOAD = """
select stream, version, timeout_ms, deadline from scheduler.watched
where stream = any($1::text[])
"""

WATCH_KEEP = """
insert into scheduler.watched (stream, version, timeout_ms, deadline)
select * from unnest($1::text[], $2::int[], $3::int[], $4::timestamptz[])
on conflict (stream) do update set
    version = excluded.version, timeout_ms = excluded.timeout_ms, deadline = excluded.deadline
"""

# An overdue delivery that waits its turn in a dispatcher (a hold, a limit): its deadline
# moved on (overdue.py).
WATCH_MOVE = """
update scheduler.watched set deadline = $2 where stream = $1
"""

WATCH_FORGET = """
delete from scheduler.watched where stream = any($1::text[])
"""

# $3: when the last pause of deliveries ended (CONTRACT §16.4), or null: a delivery that
# waited through a pause (a retry held) gets its timeout and grace again from the resume.
WATCH_OVERDUE = """
select stream, version, timeout_ms, deadline from scheduler.watched
where deadline <= $1
  and ($3::timestamptz is null
       or $3::timestamptz + timeout_ms * interval '1 millisecond' + interval '60 seconds' <= $1)
order by deadline
limit $2
"""

WATCH_EARLIEST = """
select min(greatest(
    deadline,
    $1::timestamptz + timeout_ms * interval '1 millisecond' + interval '60 seconds'
)) from scheduler.watched
"""

# -- retention (retention.py, retention_buckets.py, day_partitions.py) ------------------

# A session lock: partitions are created and dropped in several transactions.
TRY_RETENTION_LOCK = "select pg_try_advisory_lock($1)"

# CONTRACT §17: previous secrets (and private keys) whose grace ended before $1. A rotation
# racing this sets a later expiry, which the condition, checked again on the locked row,
# leaves alone.
FORGET_EXPIRED_SECRETS = """
update shared.webhook_secrets
set previous_ciphertext = null, previous_private_key = null, previous_expires_at = null
where previous_expires_at <= $1
"""
RETENTION_UNLOCK = "select pg_advisory_unlock($1)"

# Creating, sealing and dropping partitions lock every bucketed table: rather give up and
# try at the next step than stall (or deadlock with) a writer holding one of them.
SHORT_LOCK_WAIT = "set local lock_timeout = '500ms'"

BUCKETS = """
select bucket, lo, hi, opened_at, sealed_txid, sealed_position,
       logs_dropped_at is not null as logs_dropped
from eventstore.buckets
"""

NEXT_ID = "select last_value, is_called from eventstore.delivery_ids"

MARK_OPEN = "update eventstore.buckets set opened_at = $2 where bucket = $1"

# $1: the bucket's first id, $2: the margin below it the sequence must be at.
JUMP = """
select setval('eventstore.delivery_ids', $1, false) from eventstore.delivery_ids
where last_value < $1 - $2
"""

# Over one bucket's events partition ({events}).
LAST_EVENT = "select occurred_at from {events} order by position desc limit 1"

# How many deliveries of a bucket ({events}) have no final outcome ($1), and one of them.
UNFINISHED = """
select count(*) as n, min(stream) as example from (
    select distinct on (stream) stream, type
    from {events}
    order by stream, version desc
) s where type <> all($1::text[])
"""

BUCKET_READERS = "select name, checkpoint from eventstore.bucket_readers order by name"

DATED_TABLES = "select name from eventstore.dated_tables order by name"

# A dated table's partitions, with their bounds as Postgres prints them.
PARTITIONS = """
select c.oid::regclass::text as name, pg_get_expr(c.relpartbound, c.oid) as bound
from pg_inherits i join pg_class c on c.oid = i.inhrelid
where i.inhparent = $1::regclass
"""

CREATE_DAY = "create table {name} partition of {table} for values from ({start}) to ({until})"
