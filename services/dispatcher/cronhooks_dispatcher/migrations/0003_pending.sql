-- The one delivery in progress of each FORBID webhook, from its first attempt until it is
-- finished (retries included). The primary key makes "is one pending?" a race the
-- database decides.
create table dispatcher.pending (
    webhook_id   bigint primary key,
    delivery_id  bigint not null
);
