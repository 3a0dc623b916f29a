-- CONTRACT §15 (revision 3). A delivery waiting for a scheduled retry shows when
-- (`nextAttemptAt`, from `delivery.attempt_failed`'s `retry_at`; null while an attempt runs
-- and once the delivery has finished). An attempt's request body is stored cut at 64 KiB
-- (`requestBodyTruncated`, from the outcome event's `request_body_truncated`).
alter table admin.deliveries add column next_attempt_at timestamptz;
alter table admin.delivery_attempts
    add column request_body_truncated boolean not null default false;
