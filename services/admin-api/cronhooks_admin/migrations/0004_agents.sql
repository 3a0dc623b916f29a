-- Agents that may arm one-shot triggers (CONTRACT §9), and their jobs. Command-side state
-- (kept by the commands in the transaction of their events; not dropped by a rebuild).
create sequence admin.agent_ids;

create table admin.agents (
    id            bigint      primary key,
    instance_id   text        not null,
    callback_url  text        not null,
    description   text        not null,
    token_hash    text        not null unique,
    created_at    timestamptz not null,
    created_by    text,
    deleted_at    timestamptz
);
create unique index agents_live_instance on admin.agents (instance_id) where deleted_at is null;

create table admin.agent_jobs (
    agent_id      bigint      not null,
    job_id        text        not null,
    schedule_id   uuid        not null,
    fire_at       timestamptz not null,
    callback_url  text        not null,
    dedup_key     text,
    generation    integer     not null,   -- version of stream job-{agent}-{job} when armed
    state         text        not null check (state in ('armed', 'fired', 'failed', 'cancelled')),
    last_fired_at timestamptz,
    last_outcome  text,
    last_error    text,
    updated_at    timestamptz not null,
    primary key (agent_id, job_id)
);
