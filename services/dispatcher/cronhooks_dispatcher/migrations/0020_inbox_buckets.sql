-- Retention (CONTRACT §12): the inbox grows with every delivery, so it is partitioned by
-- the delivery bucket of the handled event's stream (0: a stream kept forever) and the
-- retention job drops a bucket's inbox rows with its events. An event id is in one
-- stream, so (event_id, delivery_id) is unique exactly when event_id is.
alter table dispatcher.inbox rename to inbox_unbucketed;
alter index dispatcher.inbox_pkey rename to inbox_unbucketed_pkey;

create table dispatcher.inbox (
    event_id     uuid        not null,
    handled_at   timestamptz not null default now(),
    delivery_id  bigint      not null,
    primary key (event_id, delivery_id)
) partition by range (delivery_id);
select eventstore.partition_by_buckets('dispatcher.inbox');

insert into dispatcher.inbox (event_id, handled_at, delivery_id)
select i.event_id, i.handled_at, coalesce(e.delivery_id, 0)
from dispatcher.inbox_unbucketed i left join eventstore.events e on e.event_id = i.event_id;
drop table dispatcher.inbox_unbucketed;
