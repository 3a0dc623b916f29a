-- CONTRACT §13: a cron webhook's attachNotes, the globs of the notes each delivery carries
-- (read by the dispatcher at send time; this column is only what the admin sees).
alter table admin.webhooks add column attach_notes jsonb not null default '[]';
