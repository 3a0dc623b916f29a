"""Every SQL statement of the dispatcher, in the order of a delivery's steps: look up
(lookup.py), admit (admit.py), keep attempts that wait for the importer (waiting.py),
hand lanes on (handon.py), then health and alerts (health.py, alerts.py), the alert sink
(alert_sink.py), attached notes (context_notes.py) and runs (runs.py). Its own tables are
`dispatcher.*` (migrations/); of others it reads `eventstore.events`, `shared.webhook_secrets` and
`shared.context_notes`, and it starts `shared.runs` rows."""

from __future__ import annotations

# Every event the dispatcher handled, with its effects: claimed in the transaction of
# those effects (consumer.claim_event), partitioned by the delivery bucket of its stream.
INBOX = "dispatcher.inbox"

# --- look up ---------------------------------------------------------------------------

# The secret (with its scheme, key pair and any previous secret still in its grace,
# CONTRACT §17) is found through the *stored* event's webhook_id, never the message's.
# `{events}` and `{inbox}` are the partitions of the messages' bucket. Each key is one
# index probe into each, whatever the statistics say: asyncpg keeps the generic plan made
# in a prepared statement's first calls, and a bucket's partitions are empty and
# unanalyzed then. As a join and an `exists`, that plan was a hash join over a seq scan of
# both (16-28 ms a call in a 10,000 herd). The event is found by its id under `limit 1`.
# The inbox is asked for its whole primary key (event id and the *stored* event's
# delivery id): probed by event id alone under `limit 1`, its narrow rows made a scan look
# cheaper than the index, and the plan kept scanning the growing inbox once per key (14 ms
# a call, 2.8 s of Postgres CPU in a 10,000 herd). An equality on a unique key is an
# index probe in any plan: so is the look for the stream's next version (its key).
LOOKUP = """
select k.i, e.event_id, e.type, e.stream, e.version, e.occurred_at, e.data, e.correlation_id,
       e.causation_id, e.actor, e.schema_version,
       h.handled is not null or m.moved is not null as handled,
       s.scheme, s.ciphertext, s.private_key, s.previous_ciphertext, s.previous_private_key,
       s.previous_expires_at
from unnest($1::uuid[]) with ordinality as k(event_id, i)
left join lateral (
    select * from {events} x where x.event_id = k.event_id limit 1
) e on true
left join lateral (
    select * from shared.webhook_secrets x where x.webhook_id = (e.data->>'webhook_id')::bigint
) s on true
left join lateral (
    select true as handled from {inbox} x
    where x.event_id = e.event_id and x.delivery_id = e.delivery_id
) h on true
left join lateral (
    select true as moved from {events} x
    where x.stream = e.stream and x.version = e.version + 1 and x.delivery_id = e.delivery_id
) m on true
"""

# --- admit: the webhook lane (FORBID, DELAY) and the group lane -------------------------

# Taken in its own statement: two deliveries racing for the row cannot both win.
CLAIM_WEBHOOK_LANE = """
insert into dispatcher.pending (webhook_id, delivery_id) values ($1, $2)
on conflict (webhook_id) do update set delivery_id = dispatcher.pending.delivery_id
returning delivery_id, waiting_delivery_id
"""
WAIT_FOR_WEBHOOK = """
update dispatcher.pending set waiting_delivery_id = $2, waiting_since = $3
where webhook_id = $1
"""
# The upsert locks the group's row until the decision commits.
LOCK_GROUP = """
insert into dispatcher.group_lanes (group_name) values ($1)
on conflict (group_name) do update set group_name = excluded.group_name
returning running_delivery_id
"""
HOLD_GROUP = "update dispatcher.group_lanes set running_delivery_id = $2 where group_name = $1"
JOIN_GROUP = """
insert into dispatcher.group_queue (delivery_id, group_name, webhook_id, order_at, queued_at)
values ($1, $2, $3, $4, $5)
on conflict (delivery_id) do nothing
"""

# --- attempts waiting for the importer's verdict -----------------------------------------

KEEP_WAITING = """
insert into dispatcher.attempts
    (delivery_id, attempt, webhook_id, started_at, duration_ms, request_body,
     response_status, response_body, error, outcome, request, request_body_truncated,
     report)
select d, a, w, s, ms, rb, st, rsp, null, 'importing', rq, t, rp
from unnest($1::bigint[], $2::int[], $3::bigint[], $4::timestamptz[], $5::int[], $6::text[],
            $7::int[], $8::text[], $9::jsonb[], $10::bool[], $11::jsonb[])
    as x(d, a, w, s, ms, rb, st, rsp, rq, t, rp)
on conflict (delivery_id, attempt) do nothing
"""
FORGET_WAITING = """
delete from dispatcher.attempts a
using unnest($1::bigint[], $2::int[]) as f(delivery_id, attempt)
where a.delivery_id = f.delivery_id and a.attempt = f.attempt
"""
WAITING_ATTEMPT = "select * from dispatcher.attempts where delivery_id = $1 and attempt = $2"
FORGET_DELIVERY_ATTEMPTS = "delete from dispatcher.attempts where delivery_id = $1"

# --- hand lanes on ----------------------------------------------------------------------

RELEASE_WEBHOOK_LANES = """
delete from dispatcher.pending p using unnest($1::bigint[], $2::bigint[])
    as r(webhook_id, delivery_id)
where p.webhook_id = r.webhook_id and p.delivery_id = r.delivery_id
returning p.webhook_id, p.waiting_delivery_id, p.waiting_since
"""
RELEASE_GROUPS = """
update dispatcher.group_lanes set running_delivery_id = null
where running_delivery_id = any($1::bigint[]) returning group_name
"""
TAKE_WEBHOOK_LANE = """
insert into dispatcher.pending (webhook_id, delivery_id) values ($1, $2)
on conflict (webhook_id) do nothing
"""
GROUP_HOLDER = """
select running_delivery_id from dispatcher.group_lanes where group_name = $1 for update
"""
NEXT_IN_GROUP = """
delete from dispatcher.group_queue where delivery_id = (
    select delivery_id from dispatcher.group_queue where group_name = $1
    order by order_at, delivery_id limit 1 for update)
returning delivery_id, webhook_id, queued_at
"""
FREE_WEBHOOK_LANE = """
delete from dispatcher.pending where webhook_id = $1 and delivery_id = $2
returning waiting_delivery_id, waiting_since
"""
# The first event (the request) of each waiting delivery, and its stream's version.
FIRST_REQUESTS = """
select e.type, e.data, e.schema_version, e.occurred_at,
       (select max(x.version) from eventstore.events x where x.stream = e.stream) as version
from eventstore.events e
where e.stream = any($1::text[]) and e.version = 1
"""
# Webhook streams are kept forever: their partition alone.
WEBHOOK_HISTORIES = """
select stream, type, data, schema_version from eventstore.events_kept
where stream = any($1::text[]) order by stream, version
"""

# --- health and alerts ------------------------------------------------------------------

COUNT_FAILURE = """
insert into dispatcher.webhook_health (webhook_id, consecutive_failures) values ($1, 1)
on conflict (webhook_id) do update
    set consecutive_failures = dispatcher.webhook_health.consecutive_failures + 1
returning consecutive_failures, disabled, alert_id
"""
MARK_DISABLED = "update dispatcher.webhook_health set disabled = true where webhook_id = $1"
# Most successes follow a success: the row already says 0 and is left alone. (An upsert
# that sets 0 anyway rewrites the row, a dead tuple and its WAL, on every delivery of a
# herd.) An open alert always has a count above 0, so the rows this touches are the only
# ones that can have an alert to resolve.
RECOVER = """
update dispatcher.webhook_health set consecutive_failures = 0
where webhook_id = any($1::bigint[]) and consecutive_failures <> 0
returning webhook_id, alert_id, disabled
"""
ENSURE_HEALTH = """
insert into dispatcher.webhook_health (webhook_id) select unnest($1::bigint[])
on conflict (webhook_id) do nothing
"""
RE_ENABLED = """
update dispatcher.webhook_health set consecutive_failures = 0, disabled = false
where webhook_id = $1 returning alert_id
"""
FORGET_HEALTH = """
delete from dispatcher.webhook_health where webhook_id = $1 returning alert_id, disabled
"""
NEXT_ALERT_ID = "select nextval('dispatcher.alert_ids')"
OPEN_ALERT = "update dispatcher.webhook_health set alert_id = $2 where webhook_id = $1"
CLOSE_ALERT = """
update dispatcher.webhook_health set alert_id = null where webhook_id = $1 and alert_id = $2
"""
QUEUE_ALERT_POST = """
insert into dispatcher.alert_posts (event_id, alert_id, due_at) values ($1, $2, $3)
"""

# --- the alert sink ---------------------------------------------------------------------

# The first post still owed of each alert: only it may leave (and only it says when the
# next try is: a later one that is due waits for it, and must not wake the loop).
_HEADS = """
    not exists (select 1 from dispatcher.alert_posts q
                where q.alert_id = p.alert_id and q.seq < p.seq)
"""
CLAIM_POSTS = f"""
with due as (
    select p.event_id from dispatcher.alert_posts p
    where p.due_at <= $1 and {_HEADS}
    order by p.seq
    limit $3
    for update skip locked
)
update dispatcher.alert_posts p set due_at = $2
from due where p.event_id = due.event_id
returning p.event_id, p.alert_id, p.tries
"""
NEXT_POST_DUE = f"select min(p.due_at) from dispatcher.alert_posts p where {_HEADS}"
POSTED = "delete from dispatcher.alert_posts where event_id = $1"
POST_LATER = """
update dispatcher.alert_posts set due_at = $2, tries = tries + 1, last_error = $3
where event_id = $1
"""

# --- attached notes ---------------------------------------------------------------------

# One row per attached note of each key, plus (at most) the first note of that key that the
# cap leaves out, so the caller knows to say `truncated`. `before` is the bytes of the
# notes ahead of this one, in path order (collate "C": code point order, not the locale's).
CONTEXT_NOTES = """
with wanted as (
    select k.i,
           array(select jsonb_array_elements_text(k.spec->'attach')) as attach,
           array(select jsonb_array_elements_text(k.spec->'read')) as read
    from jsonb_array_elements($1::jsonb) with ordinality as k(spec, i)
),
matching as (
    select w.i, n.path, n.content, n.content_hash,
           octet_length(n.path) + octet_length(n.content) + octet_length(n.content_hash)
               as size
    from wanted w
    join shared.context_notes n on n.path ~ any(w.attach) and n.path ~ any(w.read)
),
running as (
    select m.*,
           coalesce(sum(m.size) over (
               partition by m.i order by m.path collate "C"
               rows between unbounded preceding and 1 preceding), 0) as before
    from matching m
)
select i, path, content, content_hash, before + size <= $2 as fits
from running
where before <= $2
order by i, path collate "C"
"""


# --- runs (runs.py, CONTRACT §16.2) ----------------------------------------------------

# A run's row, written with its run.started (the importer writes the rest of its life).
# A redelivered answer's record is refused by the inbox before this: `do nothing` only
# guards a row someone wrote by hand.
START_RUNS = """
insert into shared.runs (delivery_id, webhook_id, kind, started_at, deadline, timeout_seconds,
                         timezone, trace, stream_version)
select * from unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[],
                     $5::timestamptz[], $6::int[], $7::text[], $8::text[], $9::int[])
on conflict (delivery_id) do nothing
"""
