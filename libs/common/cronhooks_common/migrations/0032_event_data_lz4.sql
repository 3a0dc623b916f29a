-- An event's data is compressed with lz4 instead of pglz when its row outgrows the page's
-- toast threshold (about 2 KB). A delivery's outcome event crosses it since revision 3:
-- its request body carries §3's longer response_schema, and the agent's costs and logs
-- come with it. Every outcome is then compressed once and decompressed by each reader (the
-- relay, the dispatcher's lookups, the projections); lz4 does both several times faster
-- than pglz (measured: docs/performance.md). Rows written before keep pglz; Postgres reads
-- both. A server built without lz4 keeps pglz: nothing else changes.
do $$
declare
    part regclass;
begin
    -- A partitioned table passes its column's method to partitions created after, not to
    -- those that exist: each is set too.
    execute 'alter table eventstore.events alter column data set compression lz4';
    for part in
        select inhrelid::regclass from pg_inherits
        where inhparent = 'eventstore.events'::regclass
    loop
        execute format('alter table %s alter column data set compression lz4', part);
    end loop;
exception when feature_not_supported then
    raise notice 'lz4 is not supported by this server: event data stays compressed by pglz';
end $$;
