-- CONTRACT §17: retryDeadlineSeconds of cron and change webhooks (configurations written
-- before it hold none: 0, no deadline).
alter table admin.webhooks add column retry_deadline_seconds integer not null default 0;
