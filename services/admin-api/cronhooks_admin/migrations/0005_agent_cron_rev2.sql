-- Agent-cron, CONTRACT rev. 2 (§9). Command-side state, like the tables of 0004.

-- `fire_at` exactly as the agent provisioned it: the list answers it byte for byte, so a
-- client comparing strings sees no change. Null for jobs provisioned before this column.
alter table admin.agent_jobs add column fire_at_text text;

-- Tokens replaced by rotateAgentToken. A call with one is 403 invalid_client (that
-- identity is gone for good), unlike a token that was never issued (401).
create table admin.agent_retired_tokens (
    token_hash  text        primary key,
    agent_id    bigint      not null,
    retired_at  timestamptz not null
);
