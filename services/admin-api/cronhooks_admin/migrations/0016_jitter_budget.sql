-- CONTRACT §13: a cron webhook's jitter window and daily delivery limit (null: none).
alter table admin.webhooks add column jitter_seconds integer not null default 0;
alter table admin.webhooks add column max_deliveries_per_day integer;
