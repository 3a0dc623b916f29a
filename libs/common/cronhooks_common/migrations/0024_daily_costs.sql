-- CONTRACT §16.1 costTotals and §16.4 maxCostPerDay: what a webhook's agents reported they
-- cost, summed per calendar day of the webhook's zone and unit (the day the outcome event
-- carrying the costs was appended). Written by the dispatcher in the transaction that
-- appends that event, so the sums are what the event store holds; read by the scheduler
-- (the day's budget) and admin-api (costTotals).
-- Not a read model: retention keeps it (a row per webhook, day and unit reported, so it
-- stays small) and `projections rebuild` leaves it alone, so the totals outlive the
-- deliveries retention drops, and a rebuild from a store that lost them changes nothing.
create table shared.daily_costs (
    webhook_id  bigint            not null,
    day         date              not null,
    unit        text              not null,
    amount      double precision  not null check (amount >= 0),
    primary key (webhook_id, day, unit)
);
