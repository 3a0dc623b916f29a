-- The event store: the append-only source of truth, and its outbox.
create schema if not exists eventstore;

create table eventstore.events (
    stream          text        not null,
    version         integer     not null check (version >= 1),
    -- Assigned at insert, so NOT commit-ordered: never tail this column. The relay reads
    -- the outbox instead (see relay.py); replays may use it, as they read committed history.
    position        bigint      generated always as identity unique,
    event_id        uuid        not null unique,
    type            text        not null,
    schema_version  smallint    not null default 1,
    data            jsonb       not null,
    correlation_id  uuid        not null,
    causation_id    uuid,
    actor           text,
    occurred_at     timestamptz not null,
    recorded_at     timestamptz not null default clock_timestamp(),
    -- (stream, version) is the optimistic-concurrency check: two writers of the same
    -- version cannot both commit.
    primary key (stream, version)
);

create function eventstore.forbid_change() returns trigger language plpgsql as $$
begin
    raise exception 'eventstore.events is append-only';
end $$;

create trigger events_append_only
    before update or delete or truncate on eventstore.events
    for each statement execute function eventstore.forbid_change();

-- One row per committed event that the broker has not yet confirmed. A row becomes
-- visible to the relay only when its transaction commits, whatever its position, so a
-- slow transaction cannot be skipped; the relay deletes rows after publisher confirms.
create table eventstore.outbox (
    position bigint primary key
);

create function eventstore.notify_outbox() returns trigger language plpgsql as $$
begin
    perform pg_notify('cronhooks_outbox', '');
    return null;
end $$;

create trigger outbox_notify
    after insert on eventstore.outbox
    for each statement execute function eventstore.notify_outbox();

-- System-wide integer identities (GraphQL `Int` ids, the payload's `id`).
create sequence eventstore.webhook_ids;
create sequence eventstore.delivery_ids;

-- The one table shared across services: events never carry secrets, so the dispatcher
-- reads the current webhook secret here. Encrypted with CRONHOOKS_SECRET_KEY.
create schema if not exists shared;

create table shared.webhook_secrets (
    webhook_id  bigint      primary key,
    ciphertext  bytea       not null,
    updated_at  timestamptz not null default now()
);
