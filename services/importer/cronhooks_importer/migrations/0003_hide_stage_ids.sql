-- Hidden notes (DELETE /api/notes/{path}, hideNotes): the row stays, so its version keeps
-- counting and a later write recreates the note at the version after the removal.
alter table importer.notes add column removed boolean not null default false;

-- A stable integer per path (the agent GraphQL API's PushedNote.id), never reused.
create table importer.note_ids (
    path  text   primary key,
    id    bigint generated always as identity unique
);
insert into importer.note_ids (path) select path from importer.notes order by path;

-- pushNotes(skipCommit: true): updates staged per token or key until commitNotes applies
-- them as one batch. Private working state (invisible to readers, no events); a staged
-- update of an api_token expires with the token.
create table importer.staged_changes (
    owner          text        not null,   -- "token:{jti}" (or "api_key:{id}")
    path           text        not null,
    content        text        not null,
    expected_hash  text,                   -- normalised lowercase hex; null: no check
    staged_at      timestamptz not null,
    expires_at     timestamptz,            -- null: never (API keys)
    primary key (owner, path)
);
create index staged_changes_expiry on importer.staged_changes (expires_at)
    where expires_at is not null;
