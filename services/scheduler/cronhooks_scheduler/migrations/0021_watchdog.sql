-- The watchdog (CONTRACT §15, watchdog.py): no delivery stays pending beyond its attempts'
-- timeouts and scheduled retries plus 60 s. One row per unfinished delivery it has read:
-- its stream's last version and the deadline its last event set (null while it waits
-- for its turn: DELAY, an execution group).
create table scheduler.watched (
    stream      text        primary key,   -- delivery-{id}
    version     integer     not null,
    timeout_ms  integer     not null,      -- of its attempts (the target's timeoutSeconds)
    deadline    timestamptz
);
create index watched_by_deadline on scheduler.watched (deadline) where deadline is not null;

-- How far it has read the event store, in commit order (cronhooks_common.tail). From the
-- start: deliveries left pending before the watchdog existed are judged too.
create table scheduler.watchdog_checkpoint (
    only_row  boolean primary key default true check (only_row),
    txid      bigint  not null,
    position  bigint  not null
);
insert into scheduler.watchdog_checkpoint (txid, position) values (0, 0);

-- Retention drops a delivery bucket only once every tail reader has read past it.
insert into eventstore.bucket_readers (name, checkpoint) values
    ('scheduler watchdog', 'select txid, position from scheduler.watchdog_checkpoint');
