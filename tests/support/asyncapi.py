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
