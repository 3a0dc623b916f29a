-- CONTRACT §16.4: a cron webhook's daily cost limits, [{"unit", "amount"}] in the order
-- given ([]: none). The sums they are checked against are shared.daily_costs.
alter table admin.webhooks add column max_cost_per_day jsonb not null default '[]';
