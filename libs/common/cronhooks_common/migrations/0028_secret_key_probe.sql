-- One known value sealed with CRONHOOKS_SECRET_KEY (secret_probe.py): every process opens
-- it at start, so a key this database was not created with stops the process at once,
-- before it consumes anything. Written once, by whichever process comes first (the
-- primary key on the constant `id` makes concurrent first starts agree on one row).
create table shared.secret_key_probe (
    id          boolean     primary key default true check (id),
    sealed      bytea       not null,
    created_at  timestamptz not null default now()
);
