-- Breadth of a chain (CONTRACT §11 revision 3): how many deliveries each trace has had
-- requested, its root included, upserted in the transaction that requests (or skips) its
-- change deliveries, so the count is exact whatever the read models lag. A row is small
-- and is dropped once the chain has been idle for the retention period (chain_limit.py).
create table importer.chain_counts (
    trace text primary key,
    deliveries integer not null,
    last_at timestamptz not null
);
create index chain_counts_last_at on importer.chain_counts (last_at);
