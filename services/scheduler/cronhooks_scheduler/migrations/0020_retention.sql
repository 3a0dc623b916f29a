-- Retention (CONTRACT §12): the inbox grows with every delivery, so it is partitioned by
-- the delivery bucket of the handled event's stream (0: a stream kept forever) and the
-- retention job drops a bucket's inbox rows with its events. An event id is in one
-- stream, so (event_id, delivery_id) is unique exactly when event_id is.
alter table scheduler.inbox rename to inbox_unbucketed;
alter index scheduler.inbox_pkey rename to inbox_unbucketed_pkey;

create table scheduler.inbox (
    event_id     uuid        not null,
    handled_at   timestamptz not null default now(),
    delivery_id  bigint      not null,
    primary key (event_id, delivery_id)
) partition by range (delivery_id);
select eventstore.partition_by_buckets('scheduler.inbox');

insert into scheduler.inbox (event_id, handled_at, delivery_id)
select i.event_id, i.handled_at, coalesce(e.delivery_id, 0)
from scheduler.inbox_unbucketed i left join eventstore.events e on e.event_id = i.event_id;
drop table scheduler.inbox_unbucketed;

-- slot_requests grows by a row per slot. Its key (webhook, slot) is what makes a second
-- delivery id for one slot impossible across replicas, so it is partitioned by the slot
-- itself (one partition per UTC day, day_partitions.py creates them ahead and drops those
-- older than the delivery retention): one slot always falls in one partition, and the
-- key stays unique. Rows from before are one partition (to the end of the day of the
-- migration; the daily ones start after it), dropped the same way.
alter table scheduler.slot_requests rename to slot_requests_unbucketed;
alter index scheduler.slot_requests_pkey rename to slot_requests_unbucketed_pkey;
alter table scheduler.slot_requests_unbucketed
    rename constraint slot_requests_delivery_id_key to slot_requests_unbucketed_delivery_id_key;

create table scheduler.slot_requests (
    webhook_id   bigint      not null,
    slot         timestamptz not null,
    delivery_id  bigint      not null,   -- unique by construction (one sequence)
    primary key (webhook_id, slot)
) partition by range (slot);
create table scheduler.slot_requests_default partition of scheduler.slot_requests default;
do $$ begin
    execute format('create table scheduler.slot_requests_before partition of scheduler.slot_requests'
                   ' for values from (minvalue) to (%L)',
                   (date_trunc('day', now() at time zone 'UTC') + interval '1 day')
                   at time zone 'UTC');
end $$;
insert into scheduler.slot_requests select webhook_id, slot, delivery_id
from scheduler.slot_requests_unbucketed;
drop table scheduler.slot_requests_unbucketed;
insert into eventstore.dated_tables (name) values ('scheduler.slot_requests');
