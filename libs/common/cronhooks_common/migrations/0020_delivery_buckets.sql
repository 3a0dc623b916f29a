-- Retention (CONTRACT §12): delivery data lives in partitions by ranges of delivery id
-- ("buckets", about a day each), so a bucket that has aged out is dropped whole instead of
-- deleted row by row. Streams that are kept forever (webhooks, notes, agents, keys,
-- triggers, alerts) are in the `kept` partition (delivery_id 0). See retention.py and
-- buckets.py, and docs/architecture.md "Retention".

-- The bucket map. Bounds never change once a bucket exists (readers cache them); the
-- retention job adds buckets ahead of the ids and drops old ones.
create table eventstore.buckets (
    bucket     integer     primary key check (bucket >= 1),
    lo         bigint      not null unique,     -- first delivery id of the bucket
    hi         bigint      not null,            -- first delivery id after it
    opened_at  timestamptz,                     -- ids began to be minted here (null: spare)
    -- Sealed: every delivery of the bucket has finished and its events partition refuses
    -- inserts (a NOT VALID check (false)); the last event it holds, in tail order. A tail
    -- whose checkpoint has passed it needs to read the partition no more (tail.py).
    sealed_txid      bigint,
    sealed_position  bigint,
    -- When the attempt logs (request and response bodies) of the bucket were dropped
    -- (CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS); projections then keep no body for it.
    logs_dropped_at  timestamptz,
    check (lo < hi)
);

-- Bumped by every change of the partitions (a bucket created, sealed or dropped), in the
-- same transaction: a tail reading the live partitions checks it in the same statement,
-- so it never reads a set of partitions older than its snapshot.
create table eventstore.bucket_generation (generation bigint not null);
insert into eventstore.bucket_generation values (1);

-- Every table partitioned by bucket, whichever service owns it: the retention job
-- creates and drops the same bucket in all of them. Services register their tables in
-- their own migrations (this library names none of them).
create table eventstore.bucketed_tables (
    name  text primary key   -- schema-qualified parent, partitioned by range (delivery_id)
);

-- The delivery id a stream belongs to (0: a stream kept forever). Appends compute it in
-- SQL, so no writer needs the bucket map.
create function eventstore.delivery_of(stream text) returns bigint
    language sql immutable parallel safe
    return case when stream like 'delivery-%' then substr(stream, 10)::bigint else 0 end;

create sequence eventstore.event_positions;

create table eventstore.events_partitioned (
    stream          text        not null,
    version         integer     not null check (version >= 1),
    -- As before: assigned at insert, not at commit (never tail it). A plain sequence, as
    -- Postgres 15 has no identity columns on partitioned tables; unique because only
    -- this sequence hands it out.
    position        bigint      not null default nextval('eventstore.event_positions'),
    event_id        uuid        not null,
    type            text        not null,
    schema_version  smallint    not null default 1,
    data            jsonb       not null,
    correlation_id  uuid        not null,
    causation_id    uuid,
    actor           text,
    occurred_at     timestamptz not null,
    recorded_at     timestamptz not null default clock_timestamp(),
    txid            bigint      not null default (pg_current_xact_id()::text::bigint),
    delivery_id     bigint      not null check (delivery_id = eventstore.delivery_of(stream)),
    -- The optimistic-concurrency check, as before: delivery_id is a function of the stream,
    -- so (stream, version, delivery_id) is unique exactly when (stream, version) is.
    primary key (stream, version, delivery_id)
) partition by range (delivery_id);

create index on eventstore.events_partitioned (position);
create index on eventstore.events_partitioned (event_id);
create index on eventstore.events_partitioned (txid, position);

create table eventstore.events_kept partition of eventstore.events_partitioned
    for values from (minvalue) to (1);
-- Ids beyond every bucket land here rather than failing an append; the retention job keeps
-- a spare bucket ahead, so it stays empty.
create table eventstore.events_default partition of eventstore.events_partitioned default;

-- The deliveries so far form bucket 1, open from now on (the job closes it after a day).
insert into eventstore.buckets (bucket, lo, hi, opened_at)
select 1, 1, greatest(last_value, 0) + 100000, now() from eventstore.delivery_ids;
do $$ begin
    execute format('create table eventstore.events_b1 partition of eventstore.events_partitioned'
                   ' for values from (1) to (%s)', (select hi from eventstore.buckets where bucket = 1));
end $$;

insert into eventstore.events_partitioned
    (stream, version, position, event_id, type, schema_version, data, correlation_id,
     causation_id, actor, occurred_at, recorded_at, txid, delivery_id)
select stream, version, position, event_id, type, schema_version, data, correlation_id,
       causation_id, actor, occurred_at, recorded_at, txid, eventstore.delivery_of(stream)
from eventstore.events;
select setval('eventstore.event_positions', greatest((select max(position) from eventstore.events), 1));

drop table eventstore.events;
alter table eventstore.events_partitioned rename to events;
insert into eventstore.bucketed_tables values ('eventstore.events');

-- Still append-only: a statement trigger on a partitioned table does not fire for a
-- statement naming a partition, so every partition gets its own (buckets.py adds it to
-- each new one). Dropping a partition fires no trigger: that is how retention removes.
create trigger events_append_only
    before update or delete or truncate on eventstore.events
    for each statement execute function eventstore.forbid_change();
create trigger events_append_only before update or delete or truncate on eventstore.events_kept
    for each statement execute function eventstore.forbid_change();
create trigger events_append_only before update or delete or truncate on eventstore.events_b1
    for each statement execute function eventstore.forbid_change();
create trigger events_append_only
    before update or delete or truncate on eventstore.events_default
    for each statement execute function eventstore.forbid_change();

-- The relay reads each outbox row's event from its own partition.
alter table eventstore.outbox add column delivery_id bigint not null default 0;
update eventstore.outbox o set delivery_id = e.delivery_id
from eventstore.events e where e.position = o.position;
alter table eventstore.outbox alter column delivery_id drop default;

-- The bucketed tables that hold attempt logs: their partition of a bucket is dropped after
-- the attempt-log retention, before the bucket itself.
create table eventstore.attempt_log_tables (
    name  text primary key references eventstore.bucketed_tables
);

-- Who must have read a bucket before it is dropped: each tail reader of every event
-- registers a query answering its checkpoint (txid, position). A bucket whose last event
-- is beyond a reader's checkpoint is held (a long-down reader loses nothing).
create table eventstore.bucket_readers (
    name        text primary key,
    checkpoint  text not null       -- select txid, position from ...
);

-- What else must change when a bucket goes, in tables that are kept (e.g. a webhook's
-- "last delivery" that pointed into it). Each statement takes the bucket's bounds
-- ($1 = lo, $2 = hi) and runs in the transaction that drops it.
create table eventstore.bucket_cleanups (
    name       text primary key,
    statement  text not null
);

-- For the services' migrations: give a table partitioned by range (delivery_id) its
-- `kept` partition (delivery_id 0: rows of streams kept forever), its default, one
-- partition per existing bucket, and register it, so the retention job creates and drops
-- its buckets with the others'.
create function eventstore.partition_by_buckets(parent text) returns void
    language plpgsql as $$
declare
    b record;
begin
    execute format('create table %s_kept partition of %s for values from (minvalue) to (1)',
                   parent, parent);
    execute format('create table %s_default partition of %s default', parent, parent);
    for b in select bucket, lo, hi from eventstore.buckets order by bucket loop
        execute format('create table %s_b%s partition of %s for values from (%s) to (%s)',
                       parent, b.bucket, parent, b.lo, b.hi);
    end loop;
    insert into eventstore.bucketed_tables (name) values (parent);
end $$;

-- Tables partitioned by UTC day of a time column in their key (day_partitions.py), kept
-- as long as the deliveries: their owners register them here.
create table eventstore.dated_tables (
    name  text primary key
);
