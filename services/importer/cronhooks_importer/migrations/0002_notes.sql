-- The note store. History is the `note.changed` stream of each note (note-{path}).
create table importer.notes (
    path          text        primary key,
    content       text        not null,
    content_hash  text        not null,   -- lowercase hex SHA-256 of the UTF-8 content
    version       integer     not null,   -- 1, 2, … = the version of stream note-{path}
    depth         integer     not null,   -- recursion depth of the write (0 = direct)
    updated_at    timestamptz not null,
    updated_by    text        not null    -- "delivery:42", "webhook:7", …
);
