-- Alerts (CONTRACT §12), projected from the alert-{id} streams: one row per alert, as its
-- latest event says (`stream_version` keeps an older event from overwriting a newer one).
create table admin.alerts (
    id                    bigint      primary key,
    webhook_id            bigint      not null,
    kind                  text        not null,
    stream_version        integer     not null,
    raised_at             timestamptz not null,
    resolved_at           timestamptz,
    consecutive_failures  integer     not null,
    last_error            text,
    disabled              boolean     not null
);
-- GraphQL lists them newest first (a few per failing spell of a webhook: a small table).
create index alerts_newest on admin.alerts (raised_at desc, id desc);
