-- CONTRACT §16.2: runTimeoutSeconds of cron and change webhooks (configurations written
-- before it hold none: 3600, the default).
alter table admin.webhooks add column run_timeout_seconds integer not null default 3600;
