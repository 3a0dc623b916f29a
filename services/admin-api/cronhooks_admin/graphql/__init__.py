"""The admin GraphQL API (CONTRACT §10): schema-first, the SDL in this directory's
*.graphql files; queries read the read models (queries.py, per-request DataLoaders in
loaders.py), mutations call the command side (cronhooks_admin.commands) and answer
payload objects."""
