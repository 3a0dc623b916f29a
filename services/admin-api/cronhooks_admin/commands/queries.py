"""The command side's SQL: the state commands keep besides their events (secrets, keys,
agents, agent jobs, idempotency keys) and what they read from the read models (the
modules of this package say what each is for)."""

from __future__ import annotations

NEXT_WEBHOOK_ID = "select nextval('eventstore.webhook_ids')"
NEXT_DELIVERY_ID = "select nextval('eventstore.delivery_ids')"
NEXT_DELIVERY_IDS = "select nextval('eventstore.delivery_ids') as id from generate_series(1, $1)"

# --- webhooks ---------------------------------------------------------------------------

# CONTRACT §3, §17: the sealed secret, the scheme and the key pair (the private key sealed;
# none for an HMAC webhook created so). $1 id, $2 sealed secret, $3 scheme, $4 sealed
# private key, $5 public key.
INSERT_SECRET = """
insert into shared.webhook_secrets (webhook_id, ciphertext, scheme, private_key, public_key)
values ($1, $2, $3, $4, $5)
"""

# A secret the admin gave (updateXWebhook's `secret`): it replaces the secret at once, with
# no grace (any previous one honoured stops); the key pair stays.
STORE_SECRET = """
insert into shared.webhook_secrets (webhook_id, ciphertext) values ($1, $2)
on conflict (webhook_id) do update
    set ciphertext = excluded.ciphertext, previous_ciphertext = null,
        previous_private_key = null, previous_expires_at = null, updated_at = now()
"""

# Regenerate (CONTRACT §17): a new secret ($2) and a new key pair ($3 sealed private, $4
# public) if the webhook has one or signs with Ed25519; with a grace ($5: when it ends, null:
# none) the current secret and private key become the previous ones, replacing any earlier
# previous pair. The right-hand sides read the row as it was before this update.
ROTATE_SECRET = """
update shared.webhook_secrets set
    previous_ciphertext = case when $5::timestamptz is null then null else ciphertext end,
    previous_private_key = case when $5::timestamptz is null then null else private_key end,
    previous_expires_at = $5,
    ciphertext = $2,
    private_key = case when private_key is not null or scheme = 'ED25519' then $3::bytea end,
    public_key = case when private_key is not null or scheme = 'ED25519' then $4::text end,
    updated_at = now()
where webhook_id = $1
"""

# A scheme switch ($2); switching to ED25519 creates a key pair ($3 sealed private, $4
# public) when the webhook has none. Switching back to HMAC keeps the pair (publicKey is
# null while HMAC; switching again signs with the same key).
SET_SCHEME = """
update shared.webhook_secrets set
    scheme = $2::text,
    private_key = case when $2::text = 'ED25519' and private_key is null then $3::bytea
                       else private_key end,
    public_key = case when $2::text = 'ED25519' and private_key is null then $4::text
                      else public_key end,
    updated_at = now()
where webhook_id = $1
"""

SECRET = "select ciphertext from shared.webhook_secrets where webhook_id = $1"

# $1 key, $2 the webhook about to be created, $3 now, $4 the oldest claim still kept: an
# older one is taken over. Returns the webhook when the claim is this call's.
CLAIM_KEY = """
insert into admin.idempotency_keys (key, webhook_id, created_at) values ($1, $2, $3)
on conflict (key) do update
    set webhook_id = excluded.webhook_id, created_at = excluded.created_at
    where admin.idempotency_keys.created_at <= $4
returning webhook_id
"""

KEY_OWNER = "select webhook_id from admin.idempotency_keys where key = $1"

# The deliveries a webhook was asked for in [$2, $3): skipped slots were not requested,
# retries have no row of their own.
REQUESTED_BETWEEN = """
select count(*) from admin.deliveries
where cron_webhook_id = $1 and status <> 'skipped'
  and created_at >= $2 and created_at < $3
"""

# --- replays ----------------------------------------------------------------------------

REPLAY_TURN = "select pg_advisory_xact_lock(hashtextextended('replay ' || $1::bigint::text, 0))"

# The webhook's failed deliveries created in [$2, $3) that are not replays and were not
# replayed yet, oldest first; at most $4. A delivery whose run ended FAILED or TIMED_OUT
# is failed too (CONTRACT §16.2; the delivery itself succeeded: its answer was a 202).
FAILED_DELIVERIES = """
select d.id from admin.deliveries d
where d.cron_webhook_id = $1 and d.replay_of is null
  and (d.status = 'failed' or exists (
      select 1 from shared.runs x
      where x.delivery_id = d.id and x.state in ('FAILED', 'TIMED_OUT')))
  and d.created_at >= $2 and ($3::timestamptz is null or d.created_at < $3)
  and not exists (select 1 from admin.deliveries r where r.replay_of = d.id)
order by d.created_at, d.id
limit $4
"""

# The first event (version 1) of these delivery streams, if it is of type $2.
FIRST_EVENTS = """
select data, schema_version from eventstore.events
where stream = any($1::text[]) and version = 1 and type = $2
"""

# $1..$3: (delivery index, path, may show content) per wanted change; $4: the cap. One row
# per wanted change whose note exists (removed or not). `before` is the content of the
# delivery's earlier changes that may be shown, by path in code point order (collate "C",
# as Python sorts): a note is read whole only when `before + size` stays within the cap,
# exactly the changes change_payload carries.
NOTES_NOW = """
with wanted as (
    select * from unnest($1::int[], $2::text[], $3::bool[]) as w(i, path, shown)
),
found as (
    select w.i, n.path, n.version, n.removed,
           case when n.removed then null else n.content_hash end as content_hash,
           case when n.removed then null else octet_length(n.content) end as size,
           w.shown and not n.removed as counted
    from wanted w join admin.notes n on n.path = w.path
),
running as (
    select f.*,
           coalesce(sum(f.size) filter (where f.counted) over (
               partition by f.i order by f.path collate "C"
               rows between unbounded preceding and 1 preceding), 0) as before
    from found f
)
select r.i, r.path, r.version, r.removed, r.content_hash, r.size,
       case when r.counted and r.before + r.size <= $4 then n.content end as content
from running r join admin.notes n on n.path = r.path
"""

# --- agents -----------------------------------------------------------------------------

INSTANCE_TAKEN = "select 1 from admin.agents where instance_id = $1 and deleted_at is null"

NEXT_AGENT_ID = "select nextval('admin.agent_ids')"

INSERT_AGENT = """
insert into admin.agents
    (id, instance_id, callback_url, description, token_hash, created_at, created_by)
values ($1, $2, $3, $4, $5, $6, $7)
"""

LIVE_AGENT_TOKEN = """
select token_hash from admin.agents where id = $1 and deleted_at is null for update
"""

# A replaced token stays known, so that it is refused as invalid_client, not unknown.
RETIRE_TOKEN = """
insert into admin.agent_retired_tokens (token_hash, agent_id, retired_at)
values ($1, $2, $3) on conflict do nothing
"""

SET_AGENT_TOKEN = "update admin.agents set token_hash = $2 where id = $1"

DELETE_AGENT = """
update admin.agents set deleted_at = $2 where id = $1 and deleted_at is null returning id
"""

# --- agent jobs (one-shot triggers) -----------------------------------------------------

# Serialises the changes of one job: its row, or (a new job) the advisory lock of its stream.
LOCK_JOB = "select pg_advisory_xact_lock(hashtext($1))"

JOB = "select * from admin.agent_jobs where agent_id = $1 and job_id = $2"

ARM_JOB = """
insert into admin.agent_jobs
    (agent_id, job_id, schedule_id, fire_at, fire_at_text, callback_url, dedup_key,
     generation, state, updated_at)
values ($1, $2, $3, $4, $5, $6, $7, $8, 'armed', $9)
on conflict (agent_id, job_id) do update set
    fire_at = excluded.fire_at, fire_at_text = excluded.fire_at_text,
    callback_url = excluded.callback_url, dedup_key = excluded.dedup_key,
    generation = excluded.generation, state = 'armed',
    updated_at = excluded.updated_at
"""

ARMED_JOB = """
select schedule_id, generation from admin.agent_jobs
where agent_id = $1 and job_id = $2 and state = 'armed'
"""

ARMED_JOB_IDS = "select job_id from admin.agent_jobs where agent_id = $1 and state = 'armed'"

CANCEL_JOB = """
update admin.agent_jobs set state = 'cancelled', updated_at = $3
where agent_id = $1 and job_id = $2
"""

ARMED_JOBS = """
select job_id, fire_at, fire_at_text, schedule_id, callback_url
from admin.agent_jobs where agent_id = $1 and state = 'armed'
order by fire_at, job_id
"""

# --- API keys ---------------------------------------------------------------------------

_API_KEY = "id, name, skip_webhooks, created_at, created_by, revoked_at"

NEXT_API_KEY_ID = "select nextval('shared.api_key_ids')"

INSERT_API_KEY = f"""
insert into shared.api_keys (id, name, key_hash, skip_webhooks, created_at, created_by)
values ($1, $2, $3, $4, $5, $6)
returning {_API_KEY}
"""

API_KEY_FOR_UPDATE = f"select {_API_KEY} from shared.api_keys where id = $1 for update"

REVOKE_API_KEY = f"""
update shared.api_keys set revoked_at = $2 where id = $1 returning {_API_KEY}
"""

API_KEYS = f"select {_API_KEY} from shared.api_keys order by id"
