-- Retention (CONTRACT §12): the inbox grows with every delivery, so it is partitioned by
-- the delivery bucket of the handled event's stream (0: a stream kept forever) and the
-- retention job drops a bucket's inbox rows with its events. An event id is in one
-- stream, so (event_id, delivery_id) is unique exactly when event_id is.
alter table importer.inbox rename to inbox_unbucketed;
alter index importer.inbox_pkey rename to inbox_unbucketed_pkey;

create table importer.inbox (
    event_id     uuid        not null,
    handled_at   timestamptz not null default now(),
    delivery_id  bigint      not null,
    primary key (event_id, delivery_id)
) partition by range (delivery_id);
select eventstore.partition_by_buckets('importer.inbox');

insert into importer.inbox (event_id, handled_at, delivery_id)
select i.event_id, i.handled_at, coalesce(e.delivery_id, 0)
from importer.inbox_unbucketed i left join eventstore.events e on e.event_id = i.event_id;
drop table importer.inbox_unbucketed;

-- change_requests grows by a row per change delivery. Its key is what makes a second
-- delivery for one (webhook, batch) impossible; it now carries the batch's time
-- (`batch_at`, the occurred_at of the batch's note.changed events: the same on every
-- replay) and is partitioned by UTC day of it (day_partitions.py), so one batch always
-- falls in one partition and the key stays unique. Rows from before keep their request
-- time as batch time (the matcher never reads those batches again) in one partition.
alter table importer.change_requests rename to change_requests_unbucketed;
alter index importer.change_requests_pkey rename to change_requests_unbucketed_pkey;

create table importer.change_requests (
    webhook_id    bigint      not null,
    batch_id      uuid        not null,
    batch_at      timestamptz not null,
    delivery_id   bigint      not null,
    requested_at  timestamptz not null,
    primary key (webhook_id, batch_id, batch_at)
) partition by range (batch_at);
create table importer.change_requests_default partition of importer.change_requests default;
do $$ begin
    execute format('create table importer.change_requests_before'
                   ' partition of importer.change_requests for values from (minvalue) to (%L)',
                   (date_trunc('day', now() at time zone 'UTC') + interval '1 day')
                   at time zone 'UTC');
end $$;
insert into importer.change_requests (webhook_id, batch_id, batch_at, delivery_id, requested_at)
select webhook_id, batch_id, requested_at, delivery_id, requested_at
from importer.change_requests_unbucketed;
drop table importer.change_requests_unbucketed;
insert into eventstore.dated_tables (name) values ('importer.change_requests');
