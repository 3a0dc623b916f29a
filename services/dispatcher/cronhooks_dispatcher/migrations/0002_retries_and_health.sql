-- An attempt whose answer carried note changes waits for the importer's verdict
-- ('importing'); `request` keeps the delivery.requested data needed to finish it.
alter table dispatcher.attempts drop constraint attempts_outcome_check;
alter table dispatcher.attempts
    add constraint attempts_outcome_check check (outcome in ('success', 'failed', 'importing'));
alter table dispatcher.attempts add column request jsonb not null default '{}';
alter table dispatcher.attempts add column response_headers jsonb;

-- Consecutive failed deliveries per webhook, for auto-disable (CRONHOOKS_AUTO_DISABLE_AFTER).
create table dispatcher.webhook_health (
    webhook_id            bigint  primary key,
    consecutive_failures  integer not null default 0,
    disabled              boolean not null default false
);
