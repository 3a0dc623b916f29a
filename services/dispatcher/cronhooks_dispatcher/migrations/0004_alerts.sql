-- Alerts (CONTRACT §12). A webhook's open alert lives on its health row: every writer of
-- health takes that row's lock first, so raising, re-raising (disabled) and resolving one
-- alert is decided by one transaction at a time, whichever replica runs it.
alter table dispatcher.webhook_health add column alert_id bigint;

-- Alert ids (Alert.id, stream alert-{id}): minted only by the dispatcher.
create sequence dispatcher.alert_ids;

-- POSTs to CRONHOOKS_ALERT_WEBHOOK_URL still owed: one row per alert event, written in the
-- transaction that appends the event, deleted once the sink answered 2xx (alert_sink.py).
-- `due_at` is also the lease of the replica sending it: if that replica dies, the row
-- comes due again and another one sends it (at least once; same webhook-id).
create table dispatcher.alert_posts (
    event_id    uuid        primary key,
    alert_id    bigint      not null,
    seq         bigserial   not null,  -- an alert's posts leave in the order of its events
    due_at      timestamptz not null,
    tries       integer     not null default 0,
    last_error  text
);
create index alert_posts_due on dispatcher.alert_posts (due_at);
create index alert_posts_alert on dispatcher.alert_posts (alert_id, seq);
