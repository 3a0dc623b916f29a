"""The read models' SQL (the modules of this package say when each runs).

Every statement is idempotent (an event applied again changes nothing) and tolerates
events of different streams in any order: the live projector, a command projecting its
own events inline, and a rebuild all end with the same tables. The batched statements
take one *round* of events (at most one per stream) as arrays (unnest): no statement
touches a delivery or a note twice, and values that many events of a round set on one
webhook are reduced to the latest per webhook (DISTINCT ON), which is what applying them
one by one gives, because every such update only moves forward.
"""

from __future__ import annotations

# --- webhooks ---------------------------------------------------------------------------

# A webhook's settings (every field of cronhooks_common.events.WebhookConfig), each in the
# admin.webhooks column of its name, with the value that column holds when an event lacks
# the setting: the other kind's settings (null), and those added to the configuration
# after its first shape (CONTRACT §13), absent from events written before them. The one
# list of them here: a new setting is a field of WebhookConfig, its column (a migration)
# and its line here.
CONFIG_COLUMNS: dict[str, object] = {
    "url": None,
    "instruction": None,
    "pass_api_key": None,
    "timeout_seconds": None,
    "max_depth": None,
    "max_retries": None,
    "enabled": None,
    "description": None,
    "read_patterns": None,
    "write_patterns": None,
    "run_timeout_seconds": 3600,  # CONTRACT §16.2, both kinds
    "signature_scheme": "HMAC",  # CONTRACT §17, both kinds
    "retry_deadline_seconds": 0,  # CONTRACT §17, both kinds: none
    # kind cron
    "cron_schedule": None,
    "timezone": None,
    "concurrency_policy": None,
    "catch_up_policy": None,
    "misfire_grace_seconds": None,
    "execution_group": "",  # none
    "attach_notes": [],  # none
    "jitter_seconds": 0,
    "max_deliveries_per_day": None,  # no limit
    "max_cost_per_day": [],  # no limit (CONTRACT §16.4)
    # kind change (CONTRACT §11)
    "include_patterns": None,
    "exclude_patterns": None,
    "on_create": None,
    "on_update": None,
    "on_remove": None,
    "include_content": None,
}

_COLUMNS = ", ".join(CONFIG_COLUMNS)
_VALUES = ", ".join(f"${i}" for i in range(8, 8 + len(CONFIG_COLUMNS)))
_SETS = ",\n    ".join(f"{c} = ${i}" for i, c in enumerate(CONFIG_COLUMNS, start=7))

# $1 id, $2 version, $3 kind, $4 at, $5 by, $6 next run, $7 when the next run was set;
# then the settings. A later event of the stream may have been applied first: kept.
INSERT_WEBHOOK = f"""
insert into admin.webhooks
    (id, stream_version, kind, has_secret, created_at, created_by, updated_at,
     next_run_at, next_run_set_at, {_COLUMNS})
values ($1, $2, $3, true, $4, $5, $4, $6, $7, {_VALUES})
on conflict (id) do nothing
"""

# $1 id, $2 version, $3 at, $4 reschedule, $5 its next run, $6 re-enabled (resets the
# failure count); then the settings. The next run is the scheduler's news too
# (NEXT_RUNS): the newer wins.
UPDATE_WEBHOOK = f"""
update admin.webhooks set
    stream_version = $2, updated_at = $3,
    next_run_at = case when $4 and next_run_set_at <= $3 then $5 else next_run_at end,
    next_run_set_at = case when $4 then greatest(next_run_set_at, $3)
                           else next_run_set_at end,
    failures_reset_at = case when $6 then $3 else failures_reset_at end,
    disabled_reason = case when $6 then null else disabled_reason end,
    {_SETS}
where id = $1 and stream_version < $2
"""

DELETE_WEBHOOK = """
update admin.webhooks set stream_version = $2, enabled = false, next_run_at = null,
    next_run_set_at = greatest(next_run_set_at, $3),
    disabled_at = $3, disabled_by = $4, updated_at = $3
where id = $1 and stream_version < $2
"""

DISABLE_WEBHOOK = """
update admin.webhooks set stream_version = $2, enabled = false, next_run_at = null,
    next_run_set_at = greatest(next_run_set_at, $4),
    disabled_reason = $3, updated_at = $4
where id = $1 and stream_version < $2
"""

# CONTRACT §17: until when a rotation's previous secret is honoured ($4; null: none).
ROTATE_WEBHOOK = """
update admin.webhooks set stream_version = $2, updated_at = $3, previous_secret_expires_at = $4
where id = $1 and stream_version < $2"""
# Events carry no key: the public key is copied from admin-api's pair (a rebuild too).
COPY_PUBLIC_KEY = """
update admin.webhooks w set public_key = s.public_key from shared.webhook_secrets s
where w.id = $1 and s.webhook_id = $1 and w.public_key is distinct from s.public_key"""

# The scheduler says where a timer went; newer news wins, older is ignored.
NEXT_RUNS = """
update admin.webhooks w set next_run_at = x.nra, next_run_set_at = x.at
from (
    select distinct on (wh) wh, nra, at
    from unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) as u(wh, nra, at)
    order by wh, at desc
) x
where w.id = x.wh and w.enabled and w.disabled_at is null and w.next_run_set_at <= x.at
"""

# The latest finished delivery, by time then id, whatever order they arrive in.
LAST_DELIVERIES = """
update admin.webhooks w set
    last_delivery_at = x.at, last_delivery_status = x.status, last_delivery_id = x.id
from (
    select distinct on (wh) wh, at, status, id
    from unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[])
        as u(wh, at, status, id)
    order by wh, at desc, id desc
) x
where w.id = x.wh and (w.last_delivery_at is null
                       or (w.last_delivery_at, w.last_delivery_id) < (x.at, x.id))
"""

# --- deliveries -------------------------------------------------------------------------

DELIVERIES_REQUESTED = """
insert into admin.deliveries
    (id, cron_webhook_id, status, trigger, scheduled_for, attempt, created_at,
     replay_of, trace, parent)
select id, wh, 'pending', trg, sf, att, at, rep, tr, par
from unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::int[],
            $6::timestamptz[], $7::bigint[], $8::text[], $9::text[])
    as x(id, wh, trg, sf, att, at, rep, tr, par)
on conflict (id) do update set
    attempt = greatest(admin.deliveries.attempt, excluded.attempt),
    -- the retry it waited for is under way
    next_attempt_at = case when excluded.attempt > admin.deliveries.attempt
                           then null else admin.deliveries.next_attempt_at end,
    -- what started the delivery (its first attempt's trigger): a retry is one
    -- more attempt of it, not a new trigger (a manual delivery stays manual)
    trigger = case when excluded.attempt = 1
                   then excluded.trigger else admin.deliveries.trigger end,
    scheduled_for = excluded.scheduled_for,
    created_at = least(admin.deliveries.created_at, excluded.created_at),
    -- only the first request says it (commands/replay.py): a retry's keeps it
    replay_of = coalesce(excluded.replay_of, admin.deliveries.replay_of),
    -- a request says the chain (§16.3); an outcome projected first guessed a root
    trace = excluded.trace, parent = excluded.parent
"""

ATTEMPTS_LOGGED = """
with attempts as (
    insert into admin.delivery_attempts
        (delivery_id, attempt, response_status, error_message, duration_ms,
         started_at, request_body_truncated, costs)
    -- costs and agent logs come as JSON text: a list for a jsonb[] element would be
    -- taken for a dimension of the array
    select d, a, st, err, ms, sa, t, c::jsonb
    from unnest($1::bigint[], $2::int[], $4::int[], $6::text[], $7::int[],
                $8::timestamptz[], $9::bool[], $10::text[]) as x(d, a, st, err, ms, sa, t, c)
    on conflict (delivery_id, attempt) do nothing
)
-- The bodies and the agent's logs, while the delivery's bucket keeps its attempt
-- logs (retention drops them whole after CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS): a
-- rebuild then writes the logs the live projection still has, no more.
insert into admin.attempt_logs
    (delivery_id, attempt, request_body, response_body, agent_logs)
select x.d, x.a, x.req, x.res, x.al::jsonb
from unnest($1::bigint[], $2::int[], $3::text[], $5::text[], $11::text[])
    as x(d, a, req, res, al)
where exists (select 1 from eventstore.buckets b
              where x.d >= b.lo and x.d < b.hi and b.logs_dropped_at is null)
on conflict (delivery_id, attempt) do nothing
"""

DELIVERIES_FINISHED = """
insert into admin.deliveries
    (id, cron_webhook_id, status, trigger, scheduled_for, attempt, response_status,
     duration_ms, error, created_at, completed_at, next_attempt_at, trace)
select * from unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[],
                     $5::timestamptz[], $6::int[], $7::int[], $8::int[], $9::text[],
                     $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::text[])
on conflict (id) do update set
    status = excluded.status, attempt = excluded.attempt,
    next_attempt_at = excluded.next_attempt_at,
    trigger = case when excluded.attempt = 1
                   then excluded.trigger else admin.deliveries.trigger end,
    response_status = excluded.response_status, duration_ms = excluded.duration_ms,
    error = excluded.error, completed_at = excluded.completed_at
where admin.deliveries.attempt <= excluded.attempt
  and admin.deliveries.status = 'pending'
"""

DELIVERIES_SKIPPED = """
insert into admin.deliveries
    (id, cron_webhook_id, status, trigger, scheduled_for, attempt, error, created_at,
     completed_at, trace, parent)
select id, wh, 'skipped', trg, sf, 0, err, at, at, tr, par
from unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[],
            $6::timestamptz[], $7::text[], $8::text[]) as x(id, wh, trg, sf, err, at, tr, par)
on conflict (id) do update set
    status = 'skipped', error = excluded.error, completed_at = excluded.completed_at
"""

# concurrencyPolicy DELAY and execution groups (CONTRACT §13): when a delivery started
# to wait, and how long it waited (as the dispatcher that released it measured).
DELIVERIES_QUEUED = """
update admin.deliveries d set queued_since = x.at
from unnest($1::bigint[], $2::timestamptz[]) as x(id, at)
where d.id = x.id
"""

DELIVERIES_RELEASED = """
update admin.deliveries d set queued_ms = x.ms
from unnest($1::bigint[], $2::int[]) as x(id, ms)
where d.id = x.id
"""

# --- notes ------------------------------------------------------------------------------

NOTES_CHANGED = """
insert into admin.notes
    (path, content_hash, version, depth, updated_at, updated_by, content, event, removed,
     written_by)
select * from unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[],
                     $6::text[], $7::text[], $8::text[], $9::bool[], $10::text[])
on conflict (path) do update set
    content_hash = excluded.content_hash, version = excluded.version,
    depth = excluded.depth, updated_at = excluded.updated_at,
    updated_by = excluded.updated_by, content = excluded.content,
    event = excluded.event, removed = excluded.removed, written_by = excluded.written_by
where admin.notes.version < excluded.version
"""

# --- agent jobs and alerts --------------------------------------------------------------

# The job stays listed only while it is armed (a newer arming, with a later generation,
# is left alone).
TRIGGER_FIRED = """
update admin.agent_jobs set
    state = case when $4 = 'delivered' then 'fired' else 'failed' end,
    last_fired_at = $5, last_outcome = $4, last_error = $6, updated_at = $5
where agent_id = $1 and job_id = $2 and generation = $3 and state = 'armed'
"""

# Raised, or raised again when its webhook is disabled: `raised_at` is the first.
ALERT_RAISED = """
insert into admin.alerts
    (id, webhook_id, kind, stream_version, raised_at, consecutive_failures,
     last_error, disabled)
values ($1, $2, $3, $4, $5, $6, $7, $8)
on conflict (id) do update set
    stream_version = excluded.stream_version,
    consecutive_failures = excluded.consecutive_failures,
    last_error = excluded.last_error, disabled = excluded.disabled
where admin.alerts.stream_version < excluded.stream_version
"""

ALERT_RESOLVED = """
update admin.alerts set stream_version = $2, resolved_at = $3,
    consecutive_failures = $4, last_error = $5, disabled = $6
where id = $1 and stream_version < $2
"""

# --- the projector's checkpoint ---------------------------------------------------------

CHECKPOINT = "select txid, position from admin.projection_checkpoints where name = 'live'"

SAVE_CHECKPOINT = """
update admin.projection_checkpoints set txid = $1, position = $2, updated_at = now()
where name = 'live'
"""

# Whether events committed before the snapshot whose xmax is $3 lie beyond ($1, $2).
BEHIND = """
select 1 from eventstore.events
where (txid, position) > ($1, $2) and txid < $3 limit 1
"""

SNAPSHOT_XMAX = "select pg_snapshot_xmax(pg_current_snapshot())::text::bigint"

TRY_LOCK = "select pg_try_advisory_xact_lock($1)"

LOCK = "select pg_advisory_xact_lock($1)"

# What a rebuild empties: every table projected from events. (admin.agent_jobs is written
# by the agents' commands, the outcome of a fire only updates it: not rebuilt.)
TRUNCATE_READ_MODELS = """
truncate admin.webhooks, admin.deliveries, admin.delivery_attempts, admin.attempt_logs,
    admin.notes, admin.alerts
"""
