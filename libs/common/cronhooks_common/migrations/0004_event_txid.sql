-- The writing transaction of every event, so a reader can tail the store in commit order
-- (see admin-api's tail.py). Positions are handed out at insert, not at commit: a reader
-- that remembers "the last position" skips a slower transaction's events. A transaction
-- id below the snapshot's xmin belongs to a finished transaction, so everything it wrote
-- is visible: reading (txid, position) pairs below that watermark never skips anything.
-- bigint: pg_current_xact_id() is the 64-bit, epoch-extended id (it does not wrap).
alter table eventstore.events
    add column txid bigint not null default (pg_current_xact_id()::text::bigint);
create index events_by_txid on eventstore.events (txid, position);
