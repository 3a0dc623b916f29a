-- A webhook disabled by the platform (410 Gone, too many failures): its pending retries
-- are cancelled, unlike a pause by an admin, which only stops new slots.
alter table scheduler.webhooks add column gone boolean not null default false;
