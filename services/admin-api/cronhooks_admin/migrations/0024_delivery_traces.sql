-- CONTRACT §16.3: which run started which. A delivery's trace (its chain's root,
-- "{kind}:{id}") and parent (the delivery whose write caused it; null for a root), from
-- its delivery.requested; deliveryChain lists a trace's deliveries in request (id) order.
alter table admin.deliveries add column trace text;
alter table admin.deliveries add column parent text;
-- Every delivery before this migration is a root (nothing carried a trace), as a rebuild
-- would project it: its kind is its webhook's.
update admin.deliveries d set trace = coalesce(w.kind, 'cron') || ':' || d.id
from admin.deliveries x left join admin.webhooks w on w.id = x.cron_webhook_id
where x.id = d.id;
alter table admin.deliveries alter column trace set not null;
create index deliveries_by_trace on admin.deliveries (trace, id);

-- What wrote the note's current version (Note.writtenBy): null for versions written before
-- revision 3, whose note.changed did not say.
alter table admin.notes add column written_by text;
