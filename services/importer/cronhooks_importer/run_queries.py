"""The SQL of runs (CONTRACT §16.2; runs.py, run_sweep.py): the rows of `shared.runs`,
which the dispatcher starts with `run.started` and the importer keeps from then on —
heartbeats, the report, the timeout — each in the transaction of its event, if any."""

from __future__ import annotations

_COLUMNS = """delivery_id, webhook_id, kind, state, started_at, deadline, timeout_seconds,
timezone, trace, stream_version, finished_at, message, costs, logs, log_count, log_bytes,
logs_dropped, log_warnings, report_digest"""

# One run, locked: its report, a heartbeat and the sweep take turns.
LOCK_RUN = f"select {_COLUMNS} from shared.runs where delivery_id = $1 for update"

# Whether the delivery has a run (a report may come before the dispatcher's commit), and
# whether an attempt of it is in flight (its stream's last event a request or a release:
# the 202 it answered may not be recorded yet).
HAS_RUN = """
select exists (select 1 from shared.runs where delivery_id = $1) as has_run,
       (select type in ('delivery.requested', 'delivery.released') from eventstore.events
        where delivery_id = $1 and stream = $2 order by version desc limit 1) as in_flight
"""

# Running runs past their deadline, oldest first; replicas take disjoint ones.
OVERDUE_RUNS = f"""
select {_COLUMNS} from shared.runs
where state = 'RUNNING' and deadline <= $1
order by deadline
limit $2
for update skip locked
"""

# A heartbeat: the deadline moved, the logs grown.
BEAT = """
update shared.runs
set deadline = $2, logs = $3, log_count = $4, log_bytes = $5, logs_dropped = $6,
    log_warnings = $7
where delivery_id = $1
"""

# The run's end, with run.finished.
FINISH = """
update shared.runs
set state = $2, finished_at = $3, message = $4, costs = $5, logs = $6, log_count = $7,
    log_bytes = $8, logs_dropped = $9, log_warnings = $10, report_digest = $11
where delivery_id = $1
"""

# run.started, which run.finished follows (its correlation chain): by its key, the
# delivery's partition.
STARTED = """
select event_id, correlation_id from eventstore.events
where delivery_id = $1 and stream = $2 and version = $3
"""
