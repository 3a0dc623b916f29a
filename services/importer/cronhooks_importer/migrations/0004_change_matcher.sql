-- Change webhooks (CONTRACT §11): the matcher's own state. It tails the event store in
-- commit order (txid, position) and keeps, in the transaction that moves its checkpoint:
-- the change webhooks as their events left them, and one row per (webhook, batch) it
-- requested a delivery for (the unique key that makes a second request impossible).
create table importer.change_webhooks (
    webhook_id  bigint primary key,
    config      jsonb  not null               -- as webhook.created/updated carry it
);

create table importer.change_requests (
    webhook_id    bigint      not null,
    batch_id      uuid        not null,
    delivery_id   bigint      not null,
    requested_at  timestamptz not null,
    primary key (webhook_id, batch_id)
);

-- Where the matcher stands. Change webhooks did not exist before this migration, so the
-- history before it can fire none: start after every transaction that has finished.
create table importer.change_matcher_checkpoint (
    only_row  boolean primary key default true check (only_row),
    txid      bigint  not null,
    position  bigint  not null
);
insert into importer.change_matcher_checkpoint (txid, position)
values (pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1, 9223372036854775807);
