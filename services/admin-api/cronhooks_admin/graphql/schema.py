"""Schema-first GraphQL: the SDL in graphql/*.graphql, one bindable per type
(bindables.py), the resolvers by area — webhooks, deliveries, stats, costs, runs,
notes, agents, api_keys, alerts, pause, destinations — each attached to its type's
bindable where it is defined."""

from __future__ import annotations

from pathlib import Path

from ariadne import load_schema_from_path, make_executable_schema
from graphql import GraphQLSchema

# Imported for their resolvers, which attach themselves to the bindables.
from cronhooks_admin.graphql import (  # noqa: F401
    agents,
    alerts,
    api_keys,
    costs,
    deliveries,
    destinations,
    notes,
    pause,
    reports,
    runs,
    stats,
    webhooks,
)
from cronhooks_admin.graphql.bindables import BINDABLES
from cronhooks_common.graphql_support import datetime_scalar

SDL = Path(__file__).parent


def build_schema() -> GraphQLSchema:
    return make_executable_schema(
        load_schema_from_path(str(SDL)), datetime_scalar, *BINDABLES, convert_names_case=True
    )
