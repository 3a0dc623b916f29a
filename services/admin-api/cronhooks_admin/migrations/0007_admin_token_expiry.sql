-- Admin tokens can expire (`cronhooks admin create-token --expires-in 30d`); null: never.
alter table admin.tokens add column expires_at timestamptz;
