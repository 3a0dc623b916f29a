-- CONTRACT §17: signatureScheme of cron and change webhooks (configurations written before
-- it hold none: HMAC), publicKey (copied from shared.webhook_secrets, where admin-api
-- keeps the key pair; GraphQL shows it only while the scheme is ED25519), and until when
-- a rotation's previous secret is honoured (from webhook.secret_rotated; null: none).
alter table admin.webhooks
    add column signature_scheme text not null default 'HMAC',
    add column public_key text,
    add column previous_secret_expires_at timestamptz;
