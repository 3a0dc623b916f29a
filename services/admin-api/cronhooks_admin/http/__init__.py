"""admin-api's HTTP surface: POST /graphql (graphql_route.py), the web page and GraphiQL
(pages.py), the agent-cron API and JWKS (agent_api.py), and in dev mode the debug
endpoints (debug.py: the test sink in sink.py, wait_all_jobs judged by pending.py)."""
