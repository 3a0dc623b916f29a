-- CONTRACT §12 (revision 3): a failed delivery that was already replayed, and a replay
-- itself, are not replayed again. A delivery's `replay_of` (from its `delivery.requested`)
-- says both: the replay has it, and the original is the one some row points at. Only that
-- pointer is kept, not an "already replayed" flag on the original, so the rows do not
-- depend on which of the two events a rebuild projects first.
alter table admin.deliveries add column replay_of bigint;
create index deliveries_replays on admin.deliveries (replay_of) where replay_of is not null;

-- Replays requested before this migration, as a rebuild would project them.
update admin.deliveries d set replay_of = (e.data->>'replay_of')::bigint
from eventstore.events e
where e.type = 'delivery.requested' and e.version = 1 and e.data ? 'replay_of'
  and e.stream = 'delivery-' || d.id;
