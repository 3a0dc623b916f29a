-- CONTRACT §16.2: a run's logs grow by heartbeats and its report under 16.1's limits for
-- the whole run (cronhooks_common.agent_report.append_to_run). Besides log_count and
-- log_bytes, the limits need what was dropped already (the drop note, the run's last entry,
-- says how many) and how many malformed entries were named (bounded per run).
alter table shared.runs
    add column logs_dropped integer not null default 0,
    add column log_warnings integer not null default 0;
