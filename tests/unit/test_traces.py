"""CONTRACT §16.3: a delivery's trace and parent, the traceparent header, who wrote a note."""

from __future__ import annotations

from typing import Any

import msgspec

from cronhooks_common.events import UNSET, DeliveryRequested, NoteChanged
from cronhooks_common.traces import Origin, delivery_ref, trace_of, traceparent
from cronhooks_dispatcher.payload import build_body, encode

# printf 'cron:42' | sha256sum; printf 'change:43' | sha256sum
CRON_42 = "8c7bc942a2a5ad2a66f694d0d778a07361ca21fa01855658476f43c80eeb3880"
CHANGE_43 = "5cccfc703fed4836b6d222d6a2f8a409ea05bbc164b2517814c422e20c4d2b72"

TARGET = {
    "url": "http://agent/hook",
    "instruction": "i",
    "timeout_seconds": 60,
    "pass_api_key": False,
    "read_patterns": ["*"],
    "write_patterns": [],
    "max_depth": 1,
    "max_retries": 0,
}


def request(**fields: Any) -> DeliveryRequested:
    data = {
        "delivery_id": 42,
        "webhook_id": 7,
        "kind": "cron",
        "attempt": 1,
        "trigger": "schedule",
        "scheduled_for": "2026-02-09T09:00:00.000Z",
        "target": TARGET,
        **fields,
    }
    return msgspec.convert(data, DeliveryRequested)


def test_traceparent_of_a_root_uses_its_own_name_for_both_ids() -> None:
    assert traceparent("cron:42", "cron:42") == f"00-{CRON_42[:32]}-{CRON_42[:16]}-01"
    assert traceparent("cron:42", "cron:42") == (
        "00-8c7bc942a2a5ad2a66f694d0d778a073-8c7bc942a2a5ad2a-01"
    )


def test_traceparent_of_a_child_has_the_root_s_trace_id_and_its_own_span_id() -> None:
    assert traceparent("cron:42", "change:43") == (
        "00-8c7bc942a2a5ad2a66f694d0d778a073-5cccfc703fed4836-01"
    )
    assert CHANGE_43.startswith("5cccfc703fed4836")


def test_a_request_without_a_trace_is_a_root() -> None:
    assert trace_of(request()) == "cron:42"
    assert trace_of(request(kind="change", delivery_id=43, trigger="change")) == "change:43"
    assert trace_of(request(trace="cron:1", parent="change:9")) == "cron:1"


def test_a_root_s_body_ends_with_its_trace_and_has_no_parent() -> None:
    body = build_body(request(), timestamp=1, api_token=None, api_url=None)
    assert list(body)[-1] == "trace" and body["trace"] == "cron:42"
    assert "parent" not in body
    # every byte before it is the body of before traces
    assert encode(body).endswith(b',"trace":"cron:42"}')


def test_a_caused_body_carries_trace_and_parent_last() -> None:
    change = request(
        kind="change",
        delivery_id=43,
        trigger="change",
        scheduled_for=None,
        depth=1,
        changes=[],
        trace="cron:42",
        parent="cron:42",
        target={**TARGET, "pass_api_key": True},
    )
    body = build_body(change, timestamp=1, api_token="t", api_url="u")
    assert list(body)[-3:] == ["api_url", "trace", "parent"]
    assert (body["trace"], body["parent"]) == ("cron:42", "cron:42")


def test_a_delivery_s_write_continues_its_chain() -> None:
    root = Origin.delivery("cron", 42, None)
    assert (root.written_by, root.chain, root.parent) == ("cron:42", "cron:42", "cron:42")
    child = Origin.delivery("change", 43, "cron:42")
    assert (child.written_by, child.chain, child.parent) == ("change:43", "cron:42", "change:43")


def test_admin_and_api_key_writes_start_no_chain() -> None:
    for origin in (Origin("admin:alice"), Origin("api_key:ci")):
        assert origin.chain is UNSET and origin.parent is UNSET


def test_roots_events_keep_their_bytes() -> None:
    """Fields added by §16.3 are left out when unset: a root's request and a note written
    before revision 3 encode as they did."""
    raw = msgspec.json.encode(request())
    assert b"trace" not in raw and b"parent" not in raw
    note = {
        "path": "a.md",
        "event": "create",
        "version": 1,
        "content_hash": None,
        "previous_hash": None,
        "depth": 0,
        "writer": "w",
        "content": None,
        "batch_id": "b",
    }
    assert b"written_by" not in msgspec.json.encode(msgspec.convert(note, NoteChanged))
    assert delivery_ref("change", 7) == "change:7"
