create schema if not exists dispatcher;

create table dispatcher.inbox (
    event_id    uuid        primary key,
    handled_at  timestamptz not null default now()
);

-- The attempt log: one row per HTTP attempt of a delivery (CONTRACT §4).
create table dispatcher.attempts (
    delivery_id      bigint      not null,
    attempt          integer     not null,
    webhook_id       bigint      not null,
    started_at       timestamptz not null,
    duration_ms      integer     not null,
    request_body     text        not null,   -- as sent, api_token redacted
    response_status  integer,
    response_body    text,                   -- first 64 KiB
    error            text,
    outcome          text        not null check (outcome in ('success', 'failed')),
    primary key (delivery_id, attempt)
);
create index attempts_webhook on dispatcher.attempts (webhook_id, started_at desc);
