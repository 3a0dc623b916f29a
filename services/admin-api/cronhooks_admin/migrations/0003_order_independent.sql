-- Projections must give the same tables whatever order events of different streams are
-- applied in (live: broker order; rebuild: store order). Values set by several streams
-- remember the time of the event that set them and only move forward.
alter table admin.webhooks add column next_run_set_at timestamptz;
alter table admin.webhooks add column last_delivery_id bigint;
-- When an admin last re-enabled the webhook: failures before it no longer count.
alter table admin.webhooks add column failures_reset_at timestamptz;
-- consecutiveFailures is derived from the deliveries at query time (order-independent).
alter table admin.webhooks drop column consecutive_failures;

create index deliveries_finished on admin.deliveries (cron_webhook_id, status, completed_at);

-- Where the last rebuild stopped in the event store.
create table admin.projection_checkpoints (
    name        text        primary key,
    position    bigint      not null,
    updated_at  timestamptz not null default now()
);
