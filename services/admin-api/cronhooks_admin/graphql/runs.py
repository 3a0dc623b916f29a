"""Runs (CONTRACT §16.2): `CronWebhookDelivery.run`, read from `shared.runs` (the run's
live state, written by the dispatcher and the importer) through the request's DataLoader,
as costs.py reads `shared.daily_costs`. The delivery's costs add its run's
(loaders.DeliveryCostsLoader)."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql.bindables import cron_webhook_delivery, run
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.reports import agent_logs
from cronhooks_admin.graphql.shapes import GraphQLObject

Info = GraphQLResolveInfo[Context]


@cron_webhook_delivery.field("run")
async def resolve_cron_webhook_delivery_run(
    delivery: GraphQLObject, info: Info
) -> GraphQLObject | None:
    """Null when the delivery started no run."""
    return await info.context.runs.load(delivery["id"])


@run.field("costs")
def resolve_run_costs(r: GraphQLObject, *_: Any) -> list[GraphQLObject]:
    costs: list[GraphQLObject] = r.get("costs") or []
    return costs


@run.field("logs")
def resolve_run_logs(r: GraphQLObject, *_: Any) -> list[GraphQLObject]:
    return agent_logs(r.get("logs") or [])
