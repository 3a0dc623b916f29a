"""Schema-first GraphQL: SDL in graphql/*.graphql, one bindable per type."""

from __future__ import annotations

from pathlib import Path

from ariadne import (
    EnumType,
    MutationType,
    ObjectType,
    QueryType,
    load_schema_from_path,
    make_executable_schema,
)
from graphql import GraphQLSchema

from cronhooks_admin import resolvers
from cronhooks_common.graphql_support import datetime_scalar

delivery_trigger = EnumType(
    "DeliveryTrigger", {"SCHEDULE": "schedule", "MANUAL": "manual", "RETRY": "retry"}
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

mutation = MutationType()
mutation.set_field("createCronWebhook", resolvers.create_cron_webhook)
mutation.set_field("updateCronWebhook", resolvers.update_cron_webhook)
mutation.set_field("deleteCronWebhook", resolvers.delete_cron_webhook)
mutation.set_field("regenerateCronWebhookSecret", resolvers.regenerate_cron_webhook_secret)
mutation.set_field("triggerCronWebhook", resolvers.trigger_cron_webhook)
mutation.set_field("createAgent", resolvers.create_agent)
mutation.set_field("rotateAgentToken", resolvers.rotate_agent_token)
mutation.set_field("deleteAgent", resolvers.delete_agent)

cron_webhook = ObjectType("CronWebhook")
cron_webhook.set_field("nextRuns", resolvers.resolve_cron_webhook_next_runs)
cron_webhook.set_field("consecutiveFailures", resolvers.resolve_cron_webhook_consecutive_failures)
cron_webhook.set_field("stats", resolvers.resolve_cron_webhook_stats)

cron_webhook_delivery = ObjectType("CronWebhookDelivery")
cron_webhook_delivery.set_field("attempts", resolvers.resolve_delivery_attempts)


def build_schema() -> GraphQLSchema:
    type_defs = load_schema_from_path(str(Path(__file__).parent / "graphql"))
    return make_executable_schema(
        type_defs,
        datetime_scalar,
        delivery_trigger,
        query,
        mutation,
        cron_webhook,
        cron_webhook_delivery,
        convert_names_case=True,
    )
