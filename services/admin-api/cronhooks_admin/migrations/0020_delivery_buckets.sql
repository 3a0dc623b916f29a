-- Retention (CONTRACT §12): the deliveries and their attempts are partitioned by delivery
-- bucket, with the event store's bounds, and leave with their events (the retention job
-- drops a bucket in every registered table at once). The tables keep their columns and
-- keys: the partition key is the delivery id both already lead with.
alter table admin.deliveries rename to deliveries_unbucketed;
alter index admin.deliveries_pkey rename to deliveries_unbucketed_pkey;
alter index admin.deliveries_by_webhook rename to deliveries_unbucketed_by_webhook;
alter index admin.deliveries_finished rename to deliveries_unbucketed_finished;
alter table admin.delivery_attempts rename to delivery_attempts_unbucketed;
alter index admin.delivery_attempts_pkey rename to delivery_attempts_unbucketed_pkey;

create table admin.deliveries (like admin.deliveries_unbucketed including defaults including constraints)
    partition by range (id);
alter table admin.deliveries add primary key (id);
create index deliveries_by_webhook on admin.deliveries (cron_webhook_id, created_at desc, id desc);
create index deliveries_finished on admin.deliveries (cron_webhook_id, status, completed_at);
select eventstore.partition_by_buckets('admin.deliveries');
insert into admin.deliveries select * from admin.deliveries_unbucketed;
drop table admin.deliveries_unbucketed;

create table admin.delivery_attempts
    (like admin.delivery_attempts_unbucketed including defaults including constraints)
    partition by range (delivery_id);
alter table admin.delivery_attempts add primary key (delivery_id, attempt);
select eventstore.partition_by_buckets('admin.delivery_attempts');
insert into admin.delivery_attempts select * from admin.delivery_attempts_unbucketed;
drop table admin.delivery_attempts_unbucketed;

-- The projector tails every event: a bucket is dropped only once it has read past it.
insert into eventstore.bucket_readers (name, checkpoint) values
    ('admin-api projector',
     'select txid, position from admin.projection_checkpoints where name = ''live''');

-- A webhook's "last delivery" that leaves with its bucket is forgotten, as a rebuild
-- from what the store still holds would not know it either.
insert into eventstore.bucket_cleanups (name, statement) values
    ('admin.webhooks last delivery',
     'update admin.webhooks set last_delivery_id = null, last_delivery_at = null,'
     ' last_delivery_status = null where last_delivery_id >= $1 and last_delivery_id < $2');

-- Attempt logs (CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS): the bodies leave the attempts for a
-- table of their own, whose bucket partitions the retention job drops after 7 days while
-- the attempts stay. The projection writes a body only while its bucket keeps its logs,
-- so a rebuild writes exactly what the live projection kept.
create table admin.attempt_logs (
    delivery_id    bigint  not null,
    attempt        integer not null,
    request_body   text    not null,
    response_body  text,
    primary key (delivery_id, attempt)
) partition by range (delivery_id);
select eventstore.partition_by_buckets('admin.attempt_logs');
insert into eventstore.attempt_log_tables (name) values ('admin.attempt_logs');
insert into admin.attempt_logs (delivery_id, attempt, request_body, response_body)
select delivery_id, attempt, request_body, response_body from admin.delivery_attempts;
alter table admin.delivery_attempts drop column request_body, drop column response_body;
