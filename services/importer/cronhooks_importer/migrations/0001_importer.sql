create schema if not exists importer;

create table importer.inbox (
    event_id    uuid        primary key,
    handled_at  timestamptz not null default now()
);
