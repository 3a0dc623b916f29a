"""The read side's SQL: what the GraphQL queries and their DataLoaders read from the read
models (the modules of this package say what each is for)."""

from __future__ import annotations

# --- webhooks (either kind; a deleted webhook is unknown) ---------------------------------

WEBHOOKS = """
select * from admin.webhooks where kind = $1 and disabled_at is null order by created_at, id
"""

WEBHOOK = "select * from admin.webhooks where id = $1 and kind = $2 and disabled_at is null"

# consecutiveFailures: failed deliveries since the later of the last success and the last
# re-enable. Derived from the deliveries, so it does not depend on event order. A delivery
# whose 202 started a run (CONTRACT §16.2, shared.runs) ends with its run, at its
# `finished_at`: FAILED and TIMED_OUT are failures, SUCCEEDED a success, RUNNING neither.
# Each branch walks an index of one webhook (deliveries_finished; runs_webhook).
FAILURES = """
select w.id, (
    select count(*) from (
        select d.completed_at as at, d.id from admin.deliveries d
        where d.cron_webhook_id = w.id and d.status = 'failed'
        union all
        select r.finished_at, r.delivery_id from shared.runs r
        where r.webhook_id = w.id and r.state in ('FAILED', 'TIMED_OUT')
    ) f
    where f.at > coalesce(w.failures_reset_at, '-infinity') and (f.at, f.id) > l.success
) as failures
from admin.webhooks w
cross join lateral (
    select greatest(
        (select (s.completed_at, s.id) from admin.deliveries s
         where s.cron_webhook_id = w.id and s.status = 'success'
           and not exists (select 1 from shared.runs x where x.delivery_id = s.id)
         order by s.completed_at desc, s.id desc limit 1),
        (select (r.finished_at, r.delivery_id) from shared.runs r
         where r.webhook_id = w.id and r.state = 'SUCCEEDED'
         order by r.finished_at desc, r.delivery_id desc limit 1),
        ('-infinity'::timestamptz, 0::bigint)) as success
) l
where w.id = any($1::bigint[])
"""


def _window(name: str, since: str) -> str:
    within = f"created_at > {since}"
    return f"""
        count(*) filter (where {within}) as {name}_total,
        count(*) filter (where {within} and status = 'success') as {name}_succeeded,
        count(*) filter (where {within} and status = 'failed') as {name}_failed,
        percentile_cont(0.5) within group (order by duration_ms)
            filter (where {within}) as {name}_p50,
        percentile_cont(0.95) within group (order by duration_ms)
            filter (where {within}) as {name}_p95
    """


# Finished deliveries of many webhooks since $2 (d1) and $3 (d7).
STATS = f"""
select cron_webhook_id, {_window("d1", "$2")}, {_window("d7", "$3")}
from admin.deliveries
where cron_webhook_id = any($1::bigint[]) and created_at > $3
  and status in ('success', 'failed')
group by cron_webhook_id
"""

# Per (webhook, zone, days): every calendar day of the window in the zone up to the day of
# $4, with its finished deliveries (a range scan of `deliveries_by_webhook` each).
DAILY_STATS = """
with wanted as (
    select distinct id, tz, days
    from unnest($1::bigint[], $2::text[], $3::int[]) as w(id, tz, days)
), calendar as (
    select w.id, w.tz, w.days, day::date as day,
           day::timestamp at time zone w.tz as starts,
           (day::date + 1)::timestamp at time zone w.tz as ends
    from wanted w,
         generate_series(($4::timestamptz at time zone w.tz)::date - (w.days - 1),
                         ($4::timestamptz at time zone w.tz)::date,
                         interval '1 day') as day
)
select c.id, c.tz, c.days, c.day,
       count(d.id) as total,
       count(d.id) filter (where d.status = 'success') as succeeded,
       count(d.id) filter (where d.status = 'failed') as failed,
       percentile_cont(0.95) within group (order by d.duration_ms) as p95
from calendar c
left join admin.deliveries d
  on d.cron_webhook_id = c.id and d.created_at >= c.starts
 and d.created_at < c.ends and d.status in ('success', 'failed')
group by c.id, c.tz, c.days, c.day
order by c.id, c.day
"""

# --- deliveries -------------------------------------------------------------------------

DELIVERIES = """
select * from admin.deliveries where cron_webhook_id = $1
order by created_at desc, id desc limit $2
"""

# Unknown when its webhook was deleted.
DELIVERY = """
select d.* from admin.deliveries d join admin.webhooks w on w.id = d.cron_webhook_id
where d.id = $1 and w.disabled_at is null
"""

# A trace's deliveries (CONTRACT §16.3) in request order: ids are taken when requested.
DELIVERY_CHAIN = """
select * from admin.deliveries where trace = $1 order by id limit $2
"""

# An attempt without its log: retention dropped the bodies (logsExpired).
ATTEMPTS = """
select a.*, l.request_body, l.response_body, l.agent_logs,
       l.delivery_id is null as logs_expired
from admin.delivery_attempts a left join admin.attempt_logs l
    on l.delivery_id = a.delivery_id and l.attempt = a.attempt
where a.delivery_id = any($1::bigint[]) order by a.delivery_id, a.attempt
"""

# What the attempts (§16.1) and the run (§16.2) of many deliveries reported they cost,
# summed per unit.
DELIVERY_COSTS = """
with reported as (
    select a.delivery_id, a.costs from admin.delivery_attempts a
    where a.delivery_id = any($1::bigint[]) and a.costs <> '[]'
    union all
    select r.delivery_id, r.costs from shared.runs r
    where r.delivery_id = any($1::bigint[]) and r.costs <> '[]'
)
select p.delivery_id, c->>'unit' as unit, sum((c->>'amount')::float8) as amount
from reported p, jsonb_array_elements(p.costs) c
group by p.delivery_id, c->>'unit' order by p.delivery_id, unit
"""

# The runs of many deliveries (CONTRACT §16.2): their live state, as the dispatcher and
# the importer keep it.
RUNS = """
select delivery_id, state, started_at, deadline, finished_at, message, costs, logs
from shared.runs where delivery_id = any($1::bigint[])
"""

# --- notes ------------------------------------------------------------------------------

NOTE = "select * from admin.notes where path = $1 and not removed"

# The prefix narrows by index, the glob (as a regex) filters.
NOTES = """
select * from admin.notes where path like $1 and path ~ $2 and not removed
order by path limit $3
"""

# The content bytes each (LIKE prefix, regex, limit) would read, as NOTES selects them.
NOTE_SIZES = """
select k.i, coalesce((
    select sum(octet_length(s.content)) from (
        select n.content from admin.notes n
        where n.path like k.prefix and n.path ~ k.regex and not n.removed
        order by n.path limit k.lim
    ) s), 0) as bytes
from unnest($1::text[], $2::text[], $3::int[]) with ordinality as k(prefix, regex, lim, i)
"""

# --- agents and alerts ------------------------------------------------------------------

AGENTS = "select * from admin.agents where deleted_at is null order by id"

AGENT = "select * from admin.agents where id = $1"

AGENT_TRIGGERS = "select * from admin.agent_jobs where agent_id = $1 order by fire_at, job_id"

# Alerts of deleted webhooks are left out: a deleted webhook is in no list (CONTRACT §8).
ALERTS = """
select a.id, a.webhook_id, a.kind, a.raised_at, a.resolved_at, a.consecutive_failures,
       a.last_error, a.disabled
from admin.alerts a
join admin.webhooks w on w.id = a.webhook_id and w.disabled_at is null
where $1::boolean is null or (a.resolved_at is null) = $1
order by a.raised_at desc, a.id desc
limit $2
"""

# --- costs (CONTRACT §16.1 costTotals) --------------------------------------------------

# The sums of the last `days` days up to today in each webhook's zone ($4: now). A row
# holds the day its costs were reported in the zone of that time. Units in code-point
# order (collate "C"), not the database's locale.
COST_TOTALS = """
with wanted as (
    select distinct id, tz, days
    from unnest($1::bigint[], $2::text[], $3::int[]) as w(id, tz, days)
)
select w.id, w.tz, w.days, c.day, c.unit, c.amount
from wanted w
join shared.daily_costs c
  on c.webhook_id = w.id
 and c.day <= ($4::timestamptz at time zone w.tz)::date
 and c.day > ($4::timestamptz at time zone w.tz)::date - w.days
where c.amount <> 0
order by w.id, c.day desc, c.unit collate "C"
"""
