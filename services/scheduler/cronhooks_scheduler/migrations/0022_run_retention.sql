-- Retention (CONTRACT §12, §16.2): a delivery's run (shared.runs, one row per delivery that
-- started one) leaves with its delivery, when the retention job drops the delivery's
-- bucket. A bucket is dropped only once every delivery in it has finished, a started run
-- included (its stream then ends in run.finished), so only finished runs leave. The daily
-- cost totals (shared.daily_costs) are kept.
insert into eventstore.bucket_cleanups (name, statement) values
    ('shared.runs of dropped deliveries',
     'delete from shared.runs where delivery_id >= $1 and delivery_id < $2');
