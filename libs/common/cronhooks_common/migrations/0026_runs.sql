-- CONTRACT §16.2: the run a 202 answer to a delivery with an api_token starts, one row per
-- such delivery. Written in the transaction that appends each run event to the delivery's
-- stream: by the dispatcher (run.started: the row, RUNNING) and by the importer (the
-- agent's report, its heartbeats, and run.finished when a report comes or the deadline
-- passes). The event store stays the truth of how a run ended (one run.finished, by the
-- stream's version check); this row is its live state: the deadline heartbeats move and
-- the logs reported so far. admin-api reads it for CronWebhookDelivery.run.
create table shared.runs (
    delivery_id      bigint       primary key,
    webhook_id       bigint       not null,
    kind             text         not null check (kind in ('cron', 'change')),
    state            text         not null default 'RUNNING'
                                  check (state in ('RUNNING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT')),
    started_at       timestamptz  not null,
    deadline         timestamptz  not null,  -- heartbeats move it, never past started_at + 24 h
    timeout_seconds  integer      not null,  -- the webhook's runTimeoutSeconds at the start
    timezone         text         not null default 'UTC',  -- whose days its costs count in
    trace            text,                   -- the delivery's trace when not a root (§16.3)
    stream_version   integer      not null,  -- run.started's version on the delivery stream
    finished_at      timestamptz,
    message          text,
    costs            jsonb        not null default '[]',  -- [{unit, amount}] as reported
    logs             jsonb        not null default '[]',  -- [{ts, level, msg, data}]
    log_count        integer      not null default 0,     -- the agent's entries kept
    log_bytes        integer      not null default 0,     -- their compact UTF-8 JSON size
    report_digest    text         -- the report that finished it: the same again is a 200
);

-- The importer's timeout sweep: running runs by deadline.
create index runs_running_deadline on shared.runs (deadline) where state = 'RUNNING';
-- Retention and admin-api's per-webhook reads.
create index runs_webhook on shared.runs (webhook_id, delivery_id);
