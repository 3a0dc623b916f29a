"""docs/asyncapi.yaml: a well-formed AsyncAPI 3.0 document covering every event type."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from cronhooks_common.events import EventType
from tests.support import asyncapi


def test_document_shape() -> None:
    spec = yaml.safe_load(asyncapi.DOCUMENT.read_text())
    assert spec["asyncapi"].startswith("3.")
    for channel in spec["channels"].values():
        binding = channel["bindings"]["amqp"]
        assert binding["$ref"] == "#/components/channelBindings/exchange"
    exchange = spec["components"]["channelBindings"]["exchange"]["amqp"]["exchange"]
    assert exchange == {
        "name": "cronhooks.events",
        "type": "topic",
        "durable": True,
        "autoDelete": False,
        "vhost": "/",
    }


def test_every_event_type_is_documented_and_nothing_else() -> None:
    assert asyncapi.known_types() == {t.value for t in EventType}
    for event_type in EventType:
        assert asyncapi.payload_pointer(event_type) is not None


def test_a_payload_that_breaks_the_document_is_refused() -> None:
    good = {
        "event_id": "6f1c2d54-6a57-4b0e-9d7e-2f3f8f0f6f1a",
        "type": "note.changed",
        "stream": "note-a",
        "version": 1,
        "occurred_at": "2026-02-09T09:00:00.000Z",
        "correlation_id": "6f1c2d54-6a57-4b0e-9d7e-2f3f8f0f6f1b",
        "causation_id": None,
        "actor": "importer",
        "schema_version": 1,
        "data": {
            "path": "a",
            "event": "create",
            "content_hash": "0" * 64,
            "previous_hash": None,
            "version": 1,
            "depth": 1,
            "writer": "webhook:1",
            "content": "# A\n",
            "batch_id": "6f1c2d54-6a57-4b0e-9d7e-2f3f8f0f6f1c",
        },
    }
    asyncapi.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        asyncapi.validate({**good, "data": {**good["data"], "event": "vanish"}})
    with pytest.raises(jsonschema.ValidationError):
        asyncapi.validate({**good, "data": {**good["data"], "content_hash": "NOT HEX"}})
    with pytest.raises(jsonschema.ValidationError):
        asyncapi.validate({**good, "type": "note.vanished"})
