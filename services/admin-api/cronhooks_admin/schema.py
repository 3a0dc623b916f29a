"""Schema-first GraphQL: SDL in graphql/*.graphql, one bindable per type."""

from __future__ import annotations

from pathlib import Path

from ariadne import (
    EnumType,
    MutationType,
    ObjectType,
    QueryType,
    UnionType,
    load_schema_from_path,
    make_executable_schema,
)
from graphql import GraphQLSchema

from cronhooks_admin import alert_queries, resolvers
from cronhooks_admin.daily_stats import resolve_daily_stats
from cronhooks_common.graphql_support import datetime_scalar

delivery_trigger = EnumType(
    "DeliveryTrigger",
    {"SCHEDULE": "schedule", "MANUAL": "manual", "RETRY": "retry", "CHANGE": "change"},
)

query = QueryType()
query.set_field("cronWebhooks", resolvers.cron_webhooks)
query.set_field("cronWebhook", resolvers.cron_webhook)
query.set_field("cronWebhookDeliveries", resolvers.cron_webhook_deliveries)
query.set_field("cronWebhookDelivery", resolvers.cron_webhook_delivery)
query.set_field("note", resolvers.note)
query.set_field("notes", resolvers.notes)
query.set_field("agents", resolvers.agents)
query.set_field("agentTriggers", resolvers.agent_triggers)
query.set_field("apiKeys", resolvers.api_keys)
query.set_field("changeWebhooks", resolvers.change_webhooks)
query.set_field("changeWebhook", resolvers.change_webhook)
query.set_field("changeWebhookDeliveries", resolvers.change_webhook_deliveries)
query.set_field("alerts", alert_queries.alerts)

mutation = MutationType()
mutation.set_field("createCronWebhook", resolvers.create_cron_webhook)
mutation.set_field("updateCronWebhook", resolvers.update_cron_webhook)
mutation.set_field("deleteCronWebhook", resolvers.delete_cron_webhook)
mutation.set_field("regenerateCronWebhookSecret", resolvers.regenerate_cron_webhook_secret)
mutation.set_field("triggerCronWebhook", resolvers.trigger_cron_webhook)
mutation.set_field("createAgent", resolvers.create_agent)
mutation.set_field("rotateAgentToken", resolvers.rotate_agent_token)
mutation.set_field("deleteAgent", resolvers.delete_agent)
mutation.set_field("createApiKey", resolvers.create_api_key)
mutation.set_field("revokeApiKey", resolvers.revoke_api_key)
mutation.set_field("createChangeWebhook", resolvers.create_change_webhook)
mutation.set_field("updateChangeWebhook", resolvers.update_change_webhook)
mutation.set_field("deleteChangeWebhook", resolvers.delete_change_webhook)
mutation.set_field("regenerateChangeWebhookSecret", resolvers.regenerate_change_webhook_secret)
mutation.set_field("triggerChangeWebhook", resolvers.trigger_change_webhook)
mutation.set_field("pushNotes", resolvers.push_notes)
mutation.set_field("commitNotes", resolvers.commit_notes)
mutation.set_field("hideNotes", resolvers.hide_notes)
mutation.set_field("replayDeliveries", resolvers.replay_deliveries)


def _typename(obj: dict[str, object], *_: object) -> object:
    return obj["__typename"]  # as the importer answered it


note_write_unions = [
    UnionType(name, _typename)
    for name in ("PushNotesOrErrorPayload", "CommitNotesOrErrorPayload", "HideNotesOrErrorPayload")
]

cron_webhook = ObjectType("CronWebhook")
cron_webhook.set_field("nextRuns", resolvers.resolve_cron_webhook_next_runs)
cron_webhook.set_field("consecutiveFailures", resolvers.resolve_cron_webhook_consecutive_failures)
cron_webhook.set_field("stats", resolvers.resolve_cron_webhook_stats)
cron_webhook.set_field("dailyStats", resolve_daily_stats)

change_webhook = ObjectType("ChangeWebhook")
change_webhook.set_field("consecutiveFailures", resolvers.resolve_cron_webhook_consecutive_failures)
change_webhook.set_field("stats", resolvers.resolve_cron_webhook_stats)
change_webhook.set_field("dailyStats", resolve_daily_stats)

cron_webhook_delivery = ObjectType("CronWebhookDelivery")
cron_webhook_delivery.set_field("attempts", resolvers.resolve_delivery_attempts)
cron_webhook_delivery.set_field("queuedMs", resolvers.resolve_queued_ms)

delivery_attempt = ObjectType("DeliveryAttempt")
# CONTRACT §12: true once retention dropped the attempt's bodies (no retention yet: false).
delivery_attempt.set_field("logsExpired", lambda attempt, *_: bool(attempt.get("logs_expired")))


def build_schema() -> GraphQLSchema:
    type_defs = load_schema_from_path(str(Path(__file__).parent / "graphql"))
    return make_executable_schema(
        type_defs,
        datetime_scalar,
        delivery_trigger,
        query,
        mutation,
        cron_webhook,
        change_webhook,
        cron_webhook_delivery,
        delivery_attempt,
        *note_write_unions,
        convert_names_case=True,
    )
