-- API keys (CONTRACT §5): long-lived credentials for direct note edits at depth 0. A key is
-- shown once; only its SHA-256 is kept. Written by admin-api in the transaction of the
-- key's `api_key.created` / `api_key.revoked` event; read by the importer on every request
-- that sends `X-API-Key` (so a revocation holds from its commit on). Shared like the
-- webhook secrets: events never carry key material.
create sequence shared.api_key_ids;

create table shared.api_keys (
    id             bigint      primary key,
    name           text        not null,
    key_hash       text        not null unique,
    skip_webhooks  boolean     not null,
    created_at     timestamptz not null,
    created_by     text,
    revoked_at     timestamptz
);
