-- admin-api projects its read models from the event store (tail.py, projector.py), not
-- from RabbitMQ: the live projector's checkpoint is a (txid, position) pair, moved in the
-- transaction that applies a batch. Projections are idempotent, so the inbox of the
-- broker consumer is gone.
alter table admin.projection_checkpoints add column txid bigint not null default 0;
insert into admin.projection_checkpoints (name, position, txid) values ('live', 0, 0)
    on conflict (name) do nothing;
drop table admin.inbox;
