"""What the GraphQL APIs did for a request: which resolvers ran, how often graphql-core
validated (tests of the request limits, which must refuse before either)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from graphql import GraphQLObjectType, GraphQLSchema, default_field_resolver

from cronhooks_admin import app as admin_app
from cronhooks_common import graphql_limits
from cronhooks_importer import agent_graphql


class Spy:
    """Counts resolver calls (every field of the schema) and graphql-core validations."""

    def __init__(self) -> None:
        self.resolved: list[str] = []
        self.validations = 0

    def wrap_schema(self, build: Callable[[], GraphQLSchema]) -> Callable[[], GraphQLSchema]:
        def built() -> GraphQLSchema:
            schema = build()
            for type_ in schema.type_map.values():
                if isinstance(type_, GraphQLObjectType) and not type_.name.startswith("__"):
                    for field in type_.fields.values():
                        field.resolve = self._counting(field.resolve or default_field_resolver)
            return schema

        return built

    def _counting(self, resolve: Any) -> Any:
        def resolver(obj: Any, info: Any, **kwargs: Any) -> Any:
            self.resolved.append(info.field_name)
            return resolve(obj, info, **kwargs)

        return resolver

    @classmethod
    def install(cls, monkeypatch: pytest.MonkeyPatch) -> Spy:
        """A Spy on the admin and the importer GraphQL schemas and on graphql-core's
        validation, for the services started after this (the schemas are built then)."""
        spy = cls()
        monkeypatch.setattr(admin_app, "build_schema", spy.wrap_schema(admin_app.build_schema))
        monkeypatch.setattr(
            agent_graphql, "build_agent_schema", spy.wrap_schema(agent_graphql.build_agent_schema)
        )
        validate = graphql_limits.validate

        def counted_validate(*args: Any, **kwargs: Any) -> Any:
            spy.validations += 1
            return validate(*args, **kwargs)

        monkeypatch.setattr(graphql_limits, "validate", counted_validate)
        return spy

    def reset(self) -> None:
        self.resolved.clear()
        self.validations = 0
