-- Notes carry their content (note.changed has it since CONTRACT rev. 2) and the event that
-- last changed them; a hidden note stays as a row (its version keeps counting) but is
-- invisible to note/notes. content_hash is null once removed.
alter table admin.notes add column content text not null default '';
alter table admin.notes add column event text not null default 'update';
alter table admin.notes add column removed boolean not null default false;
alter table admin.notes alter column content_hash drop not null;
