-- Asymmetric keys that sign the fire JWTs of agent-cron (CONTRACT §9). Private keys are
-- encrypted with CRONHOOKS_SECRET_KEY; admin-api publishes the public halves as JWKS.
create table shared.signing_keys (
    kid          text        primary key,
    algorithm    text        not null,            -- EdDSA (Ed25519)
    private_key  bytea       not null,            -- sealed PKCS#8 PEM
    public_jwk   jsonb       not null,
    created_at   timestamptz not null default now(),
    retired_at   timestamptz                      -- null: the key that signs now
);
-- At most one active key, whoever creates it first.
create unique index signing_keys_one_active on shared.signing_keys ((true)) where retired_at is null;
