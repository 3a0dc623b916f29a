-- CONTRACT §17: Ed25519 signatures and rotation with overlap. Beside each webhook's sealed
-- secret: its signature scheme, its Ed25519 key pair (the private key sealed like the
-- secret, the public key as shown: whpk_ + base64), and, during a rotation's grace, the
-- previous secret and private key (sealed) with the time they stop being honoured. Never
-- readable through any API; the dispatcher compares previous_expires_at with its clock,
-- and the scheduler's retention job clears what expired.
alter table shared.webhook_secrets
    add column scheme text not null default 'HMAC' check (scheme in ('HMAC', 'ED25519')),
    add column private_key bytea,
    add column public_key text,
    add column previous_ciphertext bytea,
    add column previous_private_key bytea,
    add column previous_expires_at timestamptz;

create index webhook_secrets_previous_expiry on shared.webhook_secrets (previous_expires_at)
    where previous_expires_at is not null;
