from __future__ import annotations

import json
from typing import Any

import msgspec

from cronhooks_common.events import DeliveryRequested
from cronhooks_dispatcher.payload import RESPONSE_SCHEMA, build_body, encode, recorded, redacted

TARGET = {
    "url": "http://agent/hook",
    "instruction": "Generate a digest",
    "timeout_seconds": 60,
    "pass_api_key": False,
    "read_patterns": ["*"],
    "write_patterns": [],
    "max_depth": 1,
    "max_retries": 0,
}
REQUEST = {
    "delivery_id": 42,
    "webhook_id": 7,
    "kind": "cron",
    "attempt": 1,
    "trigger": "schedule",
    "scheduled_for": "2026-02-09T09:00:00.000Z",
    "missed_count": 0,
    "target": TARGET,
}


def typed(request: dict[str, Any]) -> DeliveryRequested:
    """A request's data as the dispatcher has it: decoded to its class."""
    return msgspec.convert(request, DeliveryRequested)


def test_first_attempt_body_has_every_contract_field() -> None:
    body = build_body(typed(REQUEST), timestamp=1738000000, api_token=None, api_url=None)
    assert body == {
        "version": 1,
        "id": 42,
        "webhook_id": 7,
        "kind": "cron",
        "timestamp": 1738000000,
        "scheduled_for": "2026-02-09T09:00:00.000Z",
        "trigger": "schedule",
        "attempt": 1,
        "missed_count": 0,
        "instruction": "Generate a digest",
        "response_schema": RESPONSE_SCHEMA,
        "trace": "cron:42",  # CONTRACT §16.3: a root is its own trace, without parent
    }


def test_a_request_stored_before_kinds_existed_is_a_cron_delivery() -> None:
    old = {k: v for k, v in REQUEST.items() if k != "kind"}
    assert build_body(typed(old), timestamp=1, api_token=None, api_url=None)["kind"] == "cron"


def test_retry_carries_previous_error() -> None:
    request = {**REQUEST, "attempt": 2, "trigger": "retry", "previous_error": "HTTP 500: boom"}
    body = build_body(typed(request), timestamp=1, api_token=None, api_url=None)
    assert body["previous_error"] == "HTTP 500: boom"
    assert body["trigger"] == "retry"


def test_api_token_and_url_only_with_pass_api_key() -> None:
    request = {**REQUEST, "target": {**TARGET, "pass_api_key": True}}
    body = build_body(
        typed(request),
        timestamp=1,
        api_token="eyJ.secret-token.sig",
        api_url="http://127.0.0.1:8081",
    )
    assert (
        body["api_token"] == "eyJ.secret-token.sig" and body["api_url"] == "http://127.0.0.1:8081"
    )
    assert "secret-token" not in redacted(body)
    assert json.loads(redacted(body))["api_token"] == "[redacted]"


def test_encoding_is_compact_utf8() -> None:
    raw = encode({"instruction": "Сгенерируй ✓"})
    assert raw == '{"instruction":"Сгенерируй ✓"}'.encode()


def test_the_recorded_body_is_the_redacted_one_whether_or_not_a_token_is_in_it() -> None:
    odd = {**TARGET, "instruction": "Résumé 🗓 and a lone \ud800 surrogate"}
    with_token = build_body(
        typed({**REQUEST, "target": {**odd, "pass_api_key": True}}),
        timestamp=1,
        api_token="eyJ.secret-token.sig",
        api_url="http://127.0.0.1:8081",
    )
    without = build_body(
        typed({**REQUEST, "target": odd}), timestamp=1, api_token=None, api_url=None
    )
    for body in (with_token, without):
        assert recorded(body, encode(body)) == redacted(body)
    assert "secret-token" not in recorded(with_token, encode(with_token))


def test_the_recorded_body_keeps_context_notes_by_path_and_hash_only() -> None:
    from cronhooks_dispatcher.context_notes import ContextNotes

    notes = [{"path": "ctx/a.md", "content": "x" * 1000, "content_hash": "ab12"}]
    body = build_body(
        typed({**REQUEST, "target": {**TARGET, "attach_notes": ["ctx/*"]}}),
        timestamp=1,
        api_token=None,
        api_url=None,
        context=ContextNotes(notes, truncated=True),
    )
    raw = encode(body)
    assert json.loads(raw)["context_notes"] == notes  # sent whole
    logged = json.loads(recorded(body, raw))
    assert logged["context_notes"] == [{"path": "ctx/a.md", "content_hash": "ab12"}]
    assert logged["context_truncated"] is True
    assert {k: v for k, v in logged.items() if k != "context_notes"} == {
        k: v for k, v in body.items() if k != "context_notes"
    }


def test_a_recorded_body_is_cut_at_64_kib_on_a_utf8_boundary() -> None:
    from cronhooks_dispatcher.payload import RECORDED_BYTES, cut

    assert RECORDED_BYTES == 65_536
    small = '{"instruction": "é"}'
    assert cut(small) == (small, False)
    exact = "a" * RECORDED_BYTES
    assert cut(exact) == (exact, False)
    kept, truncated = cut("a" * (RECORDED_BYTES - 1) + "é" + "z")  # é straddles the cut
    assert truncated and kept == "a" * (RECORDED_BYTES - 1)
    kept, truncated = cut("€" * 30_000)  # 3 bytes each: 21,845 whole ones fit
    assert truncated and kept == "€" * 21_845 and len(kept.encode()) <= RECORDED_BYTES
    kept, truncated = cut("😀" * 20_000)
    assert truncated and kept == "😀" * 16_384


def test_a_change_is_sent_with_its_keys_in_the_stored_order() -> None:
    """The bytes signed for a change delivery are those its stored data gave before the
    request was typed: each change's keys in jsonb's order (by length, then bytes)."""
    request = typed(
        {
            **REQUEST,
            "kind": "change",
            "trigger": "change",
            "scheduled_for": None,
            "depth": 1,
            "changes": [
                {"path": "a", "event": "update", "version": 2, "content_hash": "h", "content": "x"},
                {"path": "b", "event": "remove", "version": 3, "content_hash": None},
            ],
        }
    )
    raw = encode(build_body(request, timestamp=1, api_token=None, api_url=None))
    assert (
        b'"changes":[{"path":"a","event":"update","content":"x","version":2,"content_hash":"h"},'
        b'{"path":"b","event":"remove","version":3,"content_hash":null}]'
    ) in raw
