-- CONTRACT §13: a cron webhook's execution group, and how long each delivery waited for
-- its webhook (concurrencyPolicy DELAY) or its group before its first attempt.
alter table admin.webhooks add column execution_group text not null default '';
-- queued_since: `delivery.queued` (the delivery started to wait); queued_ms: from
-- `delivery.released` (it stopped). Both null for a delivery that never waited.
alter table admin.deliveries add column queued_since timestamptz;
alter table admin.deliveries add column queued_ms integer;
