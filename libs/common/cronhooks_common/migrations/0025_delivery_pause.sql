-- CONTRACT §16.4 pauseDeliveries / resumeDeliveries: the pause switch, one row. State in
-- Postgres, not in a process: every replica of every service reads the same row. Written
-- by admin-api (and by the scheduler when `until` passes) in the transaction that appends
-- `deliveries.paused` / `deliveries.resumed`; read FOR SHARE by the scheduler's firing
-- transactions, the importer's change matcher and admin-api's manual deliveries, so a
-- pause's UPDATE waits for the batches already deciding and none decides after it
-- commits without seeing it (cronhooks_common.pause).
create table shared.delivery_pause (
    id          boolean      primary key default true check (id),  -- the one row
    since       timestamptz,  -- null: not paused
    until       timestamptz,  -- null: until resumed
    reason      text,
    paused_by   text,
    resumed_at  timestamptz   -- when the last pause ended (the watchdog's grace)
);

insert into shared.delivery_pause default values;
