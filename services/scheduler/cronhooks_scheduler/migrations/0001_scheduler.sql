create schema if not exists scheduler;

-- Events this service has handled (inbox), written in the transaction of their effect.
create table scheduler.inbox (
    event_id    uuid        primary key,
    handled_at  timestamptz not null default now()
);

-- The scheduler's copy of each webhook, projected from webhook.* events.
create table scheduler.webhooks (
    webhook_id      bigint  primary key,
    stream_version  integer not null,       -- last applied version of webhook-{id}
    config          jsonb   not null,       -- the whole configuration (webhooks.py)
    deleted         boolean not null default false
);

-- One durable timer table for everything that must happen at an instant.
-- kind 'cron': the next slot of webhook `subject`; key 'cron:{webhook_id}'.
create table scheduler.timers (
    timer_key   text        primary key,
    kind        text        not null,
    subject     bigint      not null,
    due_at      timestamptz not null,
    payload     jsonb       not null default '{}'
);
-- The loop asks "what is due?" and "when is the next one?": both use this index, so the
-- cost of a wake does not grow with the number of timers.
create index timers_due_at on scheduler.timers (due_at);

-- One slot, one delivery id: a second request for the same (webhook, slot) is impossible.
create table scheduler.slot_requests (
    webhook_id   bigint      not null,
    slot         timestamptz not null,
    delivery_id  bigint      not null unique,
    primary key (webhook_id, slot)
);
