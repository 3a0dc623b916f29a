-- CONTRACT §16.1: what an agent's answer reported, per attempt (from the outcome event).
-- Costs stay with the attempt (they are accounts, kept as long as the delivery) as a jsonb
-- array of {"unit", "amount"} in the answer's order (a jsonb object would reorder units).
-- The agent's logs are a log like the bodies: they leave with them, after
-- CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS (admin.attempt_logs).
alter table admin.delivery_attempts add column costs jsonb not null default '[]';
alter table admin.attempt_logs add column agent_logs jsonb not null default '[]';
