-- concurrencyPolicy DELAY and execution groups (CONTRACT §13), decided by the database so
-- that every dispatcher replica agrees. lanes.py reads and writes these tables.

-- DELAY's one waiting slot per webhook lives on the webhook's `pending` row (the row FORBID
-- and DELAY claim at a delivery's first attempt): one column, so "at most one slot waits"
-- cannot be broken. Releasing the row (the holder finished) returns the waiter with it,
-- so a webhook without DELAY pays no extra statement to learn that nobody waits.
alter table dispatcher.pending add column waiting_delivery_id bigint;
alter table dispatcher.pending add column waiting_since timestamptz;
alter table dispatcher.pending add constraint pending_waiter_is_another
    check (waiting_delivery_id is distinct from delivery_id);

-- One row per execution group: the delivery that runs (null: the group is idle). Every
-- decision about a group locks its row first, so a delivery that finds the group busy and
-- the finishing one that looks for a successor can never miss each other.
create table dispatcher.group_lanes (
    group_name           text   primary key,
    running_delivery_id  bigint unique
);

-- Deliveries waiting for their group, in the order they go: slot time (for a manual
-- trigger: when it was requested), then delivery id (ids are handed out in request order).
-- A row lives only while its delivery waits.
create table dispatcher.group_queue (
    delivery_id  bigint      primary key,
    group_name   text        not null,
    webhook_id   bigint      not null,
    order_at     timestamptz not null,
    queued_at    timestamptz not null
);
create index group_queue_order on dispatcher.group_queue (group_name, order_at, delivery_id);
