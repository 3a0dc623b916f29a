"""What agents' answers reported (CONTRACT §16.1): an attempt's costs and logs, and a
delivery's costs summed over its attempts. Projected by projections/deliveries.py from
the attempts' outcome events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graphql import GraphQLResolveInfo

from cronhooks_admin.graphql.bindables import cron_webhook_delivery, delivery_attempt
from cronhooks_admin.graphql.context import Context
from cronhooks_admin.graphql.shapes import GraphQLObject

Info = GraphQLResolveInfo[Context]


@delivery_attempt.field("costs")
def resolve_delivery_attempt_costs(attempt: GraphQLObject, *_: Any) -> list[GraphQLObject]:
    costs: list[GraphQLObject] = attempt.get("costs") or []
    return costs


@delivery_attempt.field("agentLogs")
def resolve_delivery_attempt_agent_logs(attempt: GraphQLObject, *_: Any) -> list[GraphQLObject]:
    """[] once retention dropped the attempt's log (the left join finds no row)."""
    return agent_logs(attempt.get("agent_logs") or [])


def agent_logs(entries: list[GraphQLObject]) -> list[GraphQLObject]:
    """Stored log entries (an attempt's, a run's) as AgentLog: ts is kept as UTC ISO 8601
    text, and the DateTime scalar writes a datetime."""
    return [{**e, "ts": datetime.fromisoformat(e["ts"]) if e.get("ts") else None} for e in entries]


@cron_webhook_delivery.field("costs")
async def resolve_cron_webhook_delivery_costs(
    delivery: GraphQLObject, info: Info
) -> list[GraphQLObject]:
    return await info.context.delivery_costs.load(delivery["id"])
