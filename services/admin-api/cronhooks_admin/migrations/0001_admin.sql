create schema if not exists admin;

create table admin.inbox (
    event_id    uuid        primary key,
    handled_at  timestamptz not null default now()
);

-- Admin API tokens: only a SHA-256 of each token is stored.
create table admin.tokens (
    id          bigint      generated always as identity primary key,
    name        text        not null,
    token_hash  text        not null unique,
    created_at  timestamptz not null default now(),
    revoked_at  timestamptz
);

-- Command-side state: the first result of each idempotency key (not a projection, so a
-- rebuild of the read models keeps it).
create table admin.idempotency_keys (
    key          text        primary key,
    webhook_id   bigint      not null,
    created_at   timestamptz not null default now()
);

-- Read models, projected from events (projection.py); droppable and rebuildable.
create table admin.webhooks (
    id                     bigint      primary key,
    stream_version         integer     not null,
    url                    text        not null,
    cron_schedule          text        not null,
    timezone               text        not null,
    instruction            text        not null,
    has_secret             boolean     not null,
    pass_api_key           boolean     not null,
    timeout_seconds        integer     not null,
    max_depth              integer     not null,
    max_retries            integer     not null,
    enabled                boolean     not null,
    description            text        not null,
    read_patterns          jsonb       not null,
    write_patterns         jsonb       not null,
    concurrency_policy     text        not null,
    catch_up_policy        text        not null,
    misfire_grace_seconds  integer     not null,
    next_run_at            timestamptz,
    created_at             timestamptz not null,
    created_by             text,
    updated_at             timestamptz not null,
    disabled_at            timestamptz,
    disabled_by            text,
    disabled_reason        text,
    last_delivery_at       timestamptz,
    last_delivery_status   text,
    consecutive_failures   integer     not null default 0
);

create table admin.deliveries (
    id               bigint      primary key,
    cron_webhook_id  bigint      not null,
    status           text        not null,
    trigger          text        not null,
    scheduled_for    timestamptz,
    attempt          integer     not null,
    response_status  integer,
    duration_ms      integer,
    error            text,
    created_at       timestamptz not null,
    completed_at     timestamptz
);
create index deliveries_by_webhook on admin.deliveries (cron_webhook_id, created_at desc, id desc);

create table admin.delivery_attempts (
    delivery_id      bigint      not null,
    attempt          integer     not null,
    request_body     text        not null,
    response_status  integer,
    response_body    text,
    error_message    text,
    duration_ms      integer     not null,
    started_at       timestamptz not null,
    primary key (delivery_id, attempt)
);
