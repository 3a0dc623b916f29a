-- Change webhooks (CONTRACT §11) share the id space, the deliveries and the stats of cron
-- webhooks, so they share the read model: a kind, the filter's columns, and the schedule's
-- columns left null for them.
alter table admin.webhooks add column kind text not null default 'cron'
    check (kind in ('cron', 'change'));
alter table admin.webhooks alter column cron_schedule drop not null;
alter table admin.webhooks alter column timezone drop not null;
alter table admin.webhooks alter column concurrency_policy drop not null;
alter table admin.webhooks alter column catch_up_policy drop not null;
alter table admin.webhooks alter column misfire_grace_seconds drop not null;
alter table admin.webhooks add column include_patterns jsonb;
alter table admin.webhooks add column exclude_patterns jsonb;
alter table admin.webhooks add column on_create boolean;
alter table admin.webhooks add column on_update boolean;
alter table admin.webhooks add column on_remove boolean;
alter table admin.webhooks add column include_content boolean;
