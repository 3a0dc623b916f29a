"""The typed events (cronhooks_common.events): one frozen class per event type, the same
fields as docs/asyncapi.yaml, and exactly the data the services produced before the
classes existed (tests/unit/data/event_samples.jsonl: one sample of every shape — which keys,
nested, with which JSON types — of every type, recorded from the events of the integration,
fuzz and browser suites at the commit before the change; long strings cut to 200 characters: tests/support/event_samples.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from cronhooks_common import events
from cronhooks_common.events import (
    UNSET,
    DeliveryRequested,
    EventType,
    NewEvent,
    Payload,
    Target,
    WebhookConfig,
)
from tests.support import asyncapi

SAMPLES = Path(__file__).parent / "data" / "event_samples.jsonl"


def _samples() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLES.read_text().splitlines() if line.strip()]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def test_every_event_type_has_one_class_and_every_class_a_type() -> None:
    types = {t: c for t, c in events.registered_types().items() if not t.startswith("test.")}
    assert set(types) == {t.value for t in EventType}
    for event_type, cls in types.items():
        assert event_type == cls.TYPE
        assert cls.__struct_config__.frozen


@pytest.mark.parametrize("event_type", [t.value for t in EventType])
def test_classes_have_the_fields_asyncapi_documents(event_type: str) -> None:
    cls = events.payload_class(event_type)
    documented, required = asyncapi.payload_fields(event_type)
    fields = set(cls.__struct_fields__)
    assert fields == documented, f"{event_type}: class {fields ^ documented} vs the document"
    # What the document requires is never left out of the JSON.
    optional = {
        name
        for name, default in zip(
            cls.__struct_fields__[len(cls.__struct_fields__) - len(cls.__struct_defaults__) :],
            cls.__struct_defaults__,
            strict=True,
        )
        if default is UNSET
    }
    assert not required & optional, f"{event_type}: required but may be absent"


@pytest.mark.parametrize(
    ("cls", "schema"), [(WebhookConfig, None), (Target, "Target")], ids=["config", "target"]
)
def test_nested_structures_match_the_document(
    cls: type[msgspec.Struct], schema: str | None
) -> None:
    if schema is None:
        cron, _ = asyncapi.schema_fields("WebhookConfig")
        change, _ = asyncapi.schema_fields("ChangeWebhookConfig")
        documented = cron | change
    else:
        documented, _ = asyncapi.schema_fields(schema)
    assert set(cls.__struct_fields__) == documented


def test_samples_cover_every_event_type() -> None:
    assert {s["type"] for s in _samples()} == {t.value for t in EventType}


@pytest.mark.parametrize("sample", _samples(), ids=lambda s: s["type"])
def test_the_data_of_every_recorded_shape_is_unchanged_through_its_class(
    sample: dict[str, Any],
) -> None:
    payload = events.decode(sample["type"], sample["data"], sample["schema_version"])
    assert _canonical(payload.to_data()) == _canonical(sample["data"])
    assert _canonical(NewEvent.of(payload).data) == _canonical(sample["data"])


def test_unset_fields_are_left_out_and_nulls_written() -> None:
    target = Target(
        url="https://a.example/hook",
        instruction="",
        timeout_seconds=30,
        pass_api_key=False,
        read_patterns=[],
        write_patterns=[],
        max_depth=1,
        max_retries=0,
    )
    data = DeliveryRequested(
        delivery_id=1, webhook_id=2, attempt=1, trigger="manual", target=target
    ).to_data()
    assert data["scheduled_for"] is None and data["target"]["attach_notes"] is None
    assert "previous_error" not in data and "changes" not in data
    assert data["kind"] == "cron" and data["missed_count"] == 0


def test_data_written_before_a_field_existed_decodes_with_its_default() -> None:
    old = {"delivery_id": 1, "webhook_id": 2, "attempt": 1, "trigger": "manual"}
    old["target"] = {
        "url": "https://a.example/hook",
        "instruction": "",
        "timeout_seconds": 30,
        "pass_api_key": False,
        "read_patterns": [],
        "write_patterns": [],
        "max_depth": 1,
        "max_retries": 0,
    }
    payload = events.decode("delivery.requested", old)
    assert isinstance(payload, DeliveryRequested)
    assert (payload.kind, payload.missed_count, payload.scheduled_for) == ("cron", 0, None)
    assert payload.target.execution_group is None


def test_a_note_change_written_before_it_said_which_is_completed_as_it_was_read() -> None:
    old = {"path": "a.md", "content_hash": "ab" * 32, "depth": 0, "writer": "admin:1"}
    first = events.decode("note.changed", {**old, "version": 1})
    later = events.decode("note.changed", {**old, "version": 2})
    assert isinstance(first, events.NoteChanged) and isinstance(later, events.NoteChanged)
    assert (first.event, later.event) == ("create", "update")
    assert (first.content, first.batch_id, first.previous_hash) == (None, "", None)


def test_data_that_does_not_fit_its_class_is_refused_by_name() -> None:
    with pytest.raises(msgspec.ValidationError, match="delivery_id"):
        events.decode("delivery.requested", {"delivery_id": "seven"})
    with pytest.raises(KeyError):
        events.decode("webhook.exploded", {})


class _Renamed(Payload, frozen=True, kw_only=True):
    """A type whose version 2 renamed a field: the upcaster turns version 1 data into it."""

    TYPE: ClassVar[str] = "test.renamed"
    SCHEMA_VERSION: ClassVar[int] = 3
    name: str
    size: int


@events.upcaster("test.renamed", 1)
def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {"name": data["title"], **{k: v for k, v in data.items() if k != "title"}}


@events.upcaster("test.renamed", 2)
def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "size": data.get("size", 0)}


def test_upcasters_bring_older_versions_to_the_class() -> None:
    assert events.decode("test.renamed", {"title": "a"}, 1) == _Renamed(name="a", size=0)
    assert events.decode("test.renamed", {"name": "b", "size": 2}, 3) == _Renamed(name="b", size=2)


def test_a_type_is_registered_once() -> None:
    with pytest.raises(TypeError, match="registered twice"):

        class _Again(Payload, frozen=True, kw_only=True):
            TYPE: ClassVar[str] = "delivery.requested"


def test_the_json_shapes_name_the_fields_of_their_classes() -> None:
    """ConfigData (a configuration as JSON) and the alert POST's body are TypedDicts beside
    their classes: a field added to the class must be added to the shape too."""
    from cronhooks_common.events import ConfigData, WebhookConfig
    from cronhooks_common.events.alert import AlertFields
    from cronhooks_dispatcher.alert_messages import AlertBody

    assert set(ConfigData.__optional_keys__) == set(WebhookConfig.__struct_fields__)
    assert set(AlertBody.__required_keys__ | AlertBody.__optional_keys__) == {
        *AlertFields.__struct_fields__,
        "type",
        "admin_url",
        "occurred_at",
        "text",
    }
