-- An attempt waiting for the importer's verdict keeps its request body as recorded: cut at
-- 64 KiB (CONTRACT §15), and whether it was, for the outcome event written later.
alter table dispatcher.attempts
    add column request_body_truncated boolean not null default false;
