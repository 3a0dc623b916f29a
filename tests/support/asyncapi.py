"""Validate events against docs/asyncapi.yaml (the published description of every event)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml"
URI = "urn:cronhooks:asyncapi"


@lru_cache(maxsize=1)
def _spec() -> tuple[dict[str, Any], Registry]:
    spec = yaml.safe_load(DOCUMENT.read_text())
    registry = Registry().with_resource(
        URI, Resource.from_contents(spec, default_specification=DRAFT7)
    )
    return spec, registry


def _validator(pointer: str) -> jsonschema.Draft7Validator:
    _, registry = _spec()
    return jsonschema.Draft7Validator(
        {"$ref": f"{URI}#{pointer}"}, registry=registry, format_checker=jsonschema.FormatChecker()
    )


@lru_cache(maxsize=64)
def payload_pointer(event_type: str) -> str | None:
    spec, _ = _spec()
    for name, message in spec["components"]["messages"].items():
        if message["name"] == event_type:
            return f"/components/messages/{name}/payload"
    return None


def known_types() -> set[str]:
    spec, _ = _spec()
    return {c["address"] for c in spec["channels"].values()}


def validate(body: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if the message body does not match the document."""
    _validator("/components/schemas/Envelope").validate(body)
    pointer = payload_pointer(body["type"])
    if pointer is None:
        raise jsonschema.ValidationError(f"event type {body['type']!r} is not documented")
    _validator(pointer).validate(body["data"])


def payload_fields(event_type: str) -> tuple[set[str], set[str]]:
    """(every property, the required ones) of an event type's payload schema, through its
    allOf parts and references. For a oneOf/anyOf the union of the alternatives."""
    spec, _ = _spec()
    pointer = payload_pointer(event_type)
    if pointer is None:
        raise KeyError(event_type)
    return _fields(spec, _resolve(spec, pointer))


def schema_fields(name: str) -> tuple[set[str], set[str]]:
    """(every property, the required ones) of a named schema under components/schemas."""
    spec, _ = _spec()
    return _fields(spec, spec["components"]["schemas"][name])


def _resolve(spec: dict[str, Any], pointer: str) -> dict[str, Any]:
    node: Any = spec
    for part in pointer.strip("/").split("/"):
        node = node[part]
    while "$ref" in node:
        node = _resolve(spec, node["$ref"].removeprefix("#"))
    return dict(node)


def _fields(spec: dict[str, Any], schema: dict[str, Any]) -> tuple[set[str], set[str]]:
    if "$ref" in schema:
        schema = _resolve(spec, schema["$ref"].removeprefix("#"))
    properties = set(schema.get("properties", {}))
    required = set(schema.get("required", []))
    for part in schema.get("allOf", []):
        more, needed = _fields(spec, part)
        properties |= more
        required |= needed
    return properties, required
