-- maxDeliveriesPerDay (CONTRACT §13): deliveries requested per webhook and calendar day of
-- the webhook's zone. Written by the scheduler (schedule slots) and admin-api (manual
-- requests) in the transaction that appends each `delivery.requested`, so the count is
-- what the event store holds; the row lock makes concurrent writers agree (budget.py).
-- Only webhooks with a limit have rows: one per such webhook and day.
create table shared.daily_deliveries (
    webhook_id  bigint  not null,
    day         date    not null,
    requested   integer not null check (requested >= 0),
    primary key (webhook_id, day)
);
