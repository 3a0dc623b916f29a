-- Read model of the note store (no content: it stays with the importer), from note.changed.
create table admin.notes (
    path          text        primary key,
    content_hash  text        not null,
    version       integer     not null,
    depth         integer     not null,
    updated_at    timestamptz not null,
    updated_by    text        not null
);
