-- Patches (CONTRACT §16.1) can be staged like writes: a staged patch keeps its find and
-- replace (find not null) instead of content, and is resolved against the note only when
-- commitNotes applies it.
alter table importer.staged_changes
    alter column content drop not null,
    add column find text,
    add column replace text;
